//go:build race

package eventlog

// raceDetector is set when the tests run under the race detector, which makes the crash tests' checks of every
// recovered store some forty times slower: the recording of the crashes is what it has to watch (the goroutines of
// Pebble and of the log run then); the checks of each clone are one goroutine's reads, done in full without it.
const raceDetector = true
