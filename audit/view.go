package audit

import (
	"fmt"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// View is the comparable form of a state: what the queries show, in their
// deterministic order. Diffing two Views names the differences by JSON path
// ("$.runs[0].tasks[2].status").
type View struct {
	Position uint64             `json:"position"`
	Config   projections.Config `json:"config"`
	Slots    projections.Slots  `json:"slots"`
	Runs     []RunView          `json:"runs"`
}

// RunView is one run and everything scoped to it.
type RunView struct {
	Run         projections.Run          `json:"run"`
	Tasks       []projections.Task       `json:"tasks"`
	Delegations []projections.Delegation `json:"delegations"`
	Ledger      []projections.Account    `json:"ledger"`
}

// ViewOf is the View of s, restricted to one run when run is not "".
func ViewOf(s *projections.State, run string) View {
	v := View{Position: s.Position, Config: s.Config(), Slots: s.Slots(), Runs: []RunView{}}
	page, _ := s.Runs(projections.RunFilter{})
	for _, r := range page.Runs {
		if run != "" && r.RunID != run {
			continue
		}
		v.Runs = append(v.Runs, RunView{
			Run: r, Tasks: s.Tasks(r.RunID), Delegations: s.Delegations(r.RunID), Ledger: s.Ledger(r.RunID),
		})
	}
	return v
}

// SnapshotDiff is the comparison of a rebuilt state with the store's
// newest snapshot.
type SnapshotDiff struct {
	// SnapshotPosition is the snapshot's position; Compared is the
	// position both states were brought to before comparing.
	SnapshotPosition uint64 `json:"snapshotPosition"`
	Compared         uint64 `json:"compared"`
	// Differences lists the first differences (CompareSnapshot's most); Total counts them all.
	Differences []Difference `json:"differences"`
	Total       int          `json:"total"`
}

// CompareSnapshot compares rebuilt (a fold from position 1) with the newest
// snapshot. When rebuilt is at or past the snapshot, the snapshot is brought
// to the same position with the log's tail, which is exactly how the daemon
// starts; when rebuilt stops before it, a fresh fold is taken to the
// snapshot's position. Both sides then must be equal: a difference means the
// snapshot does not hold what the log says. Left is the rebuilt side; the
// first most differences are listed (most <= 0: all) and all are counted
// (DiffAtMost). A run
// of the snapshot gone cold whose read back from the log fails is an error
// (wrapping eventlog.ErrCorrupt when the log is damaged), not a difference; a snapshot start-up does not load
// (bytes that do not decode, the state at another position than it is stored at) is an error wrapping
// projections.ErrBadSnapshot.
func CompareSnapshot(l *eventlog.Log, rebuilt *projections.State, run string, most int) (SnapshotDiff, error) {
	snap, err := l.LatestSnapshot()
	if err != nil {
		return SnapshotDiff{}, fmt.Errorf("audit: snapshot: %w", err)
	}
	loaded, err := projections.DecodeSnapshot(snap.Data)
	if err != nil {
		return SnapshotDiff{}, fmt.Errorf("audit: snapshot at %d: %w", snap.Position, err)
	}
	// NB: the check start-up makes before it uses a snapshot (projections.LoadTiered): compared, one that holds the
	// state at another position showed no difference once folded on from the position it holds, and every event in
	// between as one against a fold to the position it is stored at.
	if loaded.Position != snap.Position {
		return SnapshotDiff{}, fmt.Errorf("audit: %w: the snapshot at %d holds the state at position %d (start-up "+
			"does not load it)", projections.ErrBadSnapshot, snap.Position, loaded.Position)
	}
	// NB: the snapshot holds the runs gone cold as summaries, their records in the log: read back from it as the
	// daemon reads them, or they would be missing from the snapshot's side when no tail is folded into it.
	cold := projections.NewColdStore(l, 0)
	loaded.SetColdStore(cold)
	left := rebuilt
	if rebuilt.Position >= snap.Position {
		if err := projections.Replay(loaded, l, rebuilt.Position); err != nil {
			return SnapshotDiff{}, fmt.Errorf("audit: snapshot tail: %w", err)
		}
	} else {
		left = projections.New()
		if err := projections.Replay(left, l, snap.Position); err != nil {
			return SnapshotDiff{}, fmt.Errorf("audit: fold to the snapshot: %w", err)
		}
	}
	d := SnapshotDiff{SnapshotPosition: snap.Position, Compared: left.Position}
	want, got := ViewOf(left, run), ViewOf(loaded, run)
	if cerr := cold.Err(); cerr != nil {
		// NB: a cold run that could not be read back answers as if it held nothing, and each of its records would
		// show as a difference: the snapshot was not compared, and the read's error says why.
		return SnapshotDiff{}, fmt.Errorf("audit: snapshot at %d: read back a finished run: %w", snap.Position, cerr)
	}
	found, err := DiffAtMost(want, got, most)
	d.Differences, d.Total = found.Listed, found.Total
	return d, err
}
