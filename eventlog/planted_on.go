//go:build crewlog_plantedfsync

package eventlog

// syncOutcome plants a known bug, in test builds tagged crewlog_plantedfsync only: a failed WAL sync is ignored,
// so the append is acknowledged, served as durable, and the log goes on, although what it wrote may be gone (and
// Pebble writes nothing more to that WAL). The Jepsen check of integration/ must flag such a build once it
// restarts (acknowledged commands lost).
func syncOutcome(error) error { return nil }
