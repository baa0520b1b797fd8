// Package audittest builds crewlog stores for the tests and benchmarks of
// audit and cmd/crewctl: a small recorded scenario written by the real
// commands Engine, a log whose recorded decision today's policy would take
// differently (hand-made events appended with eventlog.Append), and a large
// decision-shaped log for the replay and verify benchmarks.
//
// Every store is generated, deterministically, into a directory the caller
// owns (t.TempDir()); nothing here is committed as binary Pebble files, so
// the repository stays small and a change of the store format regenerates
// itself. Clocks and ids are fixed: two runs give byte-identical events, so
// golden outputs stay stable.
//
// It is a test helper: nothing outside tests should import it.
package audittest
