package bench

import (
	"fmt"
	"math"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/projections"
)

// ActiveState is what crewd holds in memory of a history store once it has
// started: its newest snapshot, and the runs and records that snapshot
// holds. Two stores of different sizes whose ActiveState is equal (but for
// SnapshotAt) start crewd on the same active work.
type ActiveState struct {
	SnapshotAt    uint64 // the snapshot's position (0: none)
	SnapshotBytes int    // its size as stored
	// Records is the snapshot's size in records (State.SnapshotRecords):
	// a hot run and each of its records, and a cold run's summary still
	// held in memory as one.
	Records int64
	HotRuns int
	// ColdInMemory is the cold runs whose summary is held in memory, not
	// in the index of summaries (0 once they are written).
	ColdInMemory int
	// The active runs' events (as their usage counts them), tasks,
	// delegations (InFlight of them not settled), accounts and messages.
	Events                                           int64
	Tasks, Delegations, InFlight, Accounts, Messages int
}

// activeStateOf counts what s holds of the runs named: the active runs of
// a history. The snapshot's position and size are the caller's to set.
func activeStateOf(s *projections.State, runs []string) ActiveState {
	a := ActiveState{Records: s.SnapshotRecords(), HotRuns: s.HotRuns(), ColdInMemory: s.ColdInMemory(),
		InFlight: len(s.InFlight())}
	for _, id := range runs {
		if r, ok := s.Run(id); ok {
			a.Events += r.Usage.Events
		}
		a.Tasks += len(s.Tasks(id))
		a.Delegations += len(s.Delegations(id))
		a.Accounts += len(s.Ledger(id))
		messages, _ := s.MessagesSince(id, "", math.MinInt64, math.MaxInt)
		a.Messages += messages
	}
	return a
}

// storeHead reads the store's head and the active state of its newest
// snapshot that crewd can load (zero when there is none), for the runs
// named.
func storeHead(dir string, runs []string) (head uint64, a ActiveState, err error) {
	l, err := audit.Open(dir)
	if err != nil {
		return 0, a, err
	}
	defer l.Close()
	head, _ = l.Head()
	if snap, err := l.LatestSnapshot(); err == nil {
		if st, err := projections.DecodeSnapshot(snap.Data); err == nil {
			a = activeStateOf(st, runs)
			a.SnapshotAt, a.SnapshotBytes = snap.Position, len(snap.Data)
		}
	}
	return head, a, nil
}

// String is the active state in one line, as the report prints it.
func (a ActiveState) String() string {
	return fmt.Sprintf("snapshot at %d: %s (%d bytes), %d records; %d hot runs, %d cold summaries in memory; "+
		"the active runs: %d events, %d tasks, %d delegations (%d in flight), %d accounts, %d messages",
		a.SnapshotAt, fmtBytesFine(int64(a.SnapshotBytes)), a.SnapshotBytes, a.Records, a.HotRuns, a.ColdInMemory,
		a.Events, a.Tasks, a.Delegations, a.InFlight, a.Accounts, a.Messages)
}

// fmtBytesFine is b in KiB or MiB with two decimals.
func fmtBytesFine(b int64) string {
	if b < 1<<20 {
		return fmt.Sprintf("%.2f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20))
}
