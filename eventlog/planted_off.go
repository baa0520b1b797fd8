//go:build !crewlog_plantedfsync

package eventlog

// syncOutcome is the sync's error itself in every real build: a failed sync fails the append and the log.
// planted_on.go replaces it for the linearizability checker's self-test only.
func syncOutcome(err error) error { return err }
