package main

import (
	"context"
	"errors"
	"slices"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// diffState compares the rebuilt state with the newest snapshot, or with
// the live daemon's views when live is set.
func (a *app) diffState(ctx context.Context, l *eventlog.Log, s *projections.State, run string, live bool) (*diffOutput, error) {
	if !live {
		d, err := audit.CompareSnapshot(l, s, run)
		switch {
		case errors.Is(err, eventlog.ErrNotFound):
			return nil, problemf("replay --diff: the store has no snapshot to compare with")
		case err != nil:
			return nil, problemf("replay --diff: %v", err)
		}
		return &diffOutput{Against: "snapshot", Position: d.Compared, SnapshotPosition: d.SnapshotPosition, Differences: d.Differences}, nil
	}
	b, err := a.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	daemon, err := liveView(ctx, b, s, run)
	if err != nil {
		return nil, err
	}
	// The daemon's position and config are not queryable: compare what
	// the views show.
	mine := audit.ViewOf(s, run)
	mine.Position, daemon.Position = 0, 0
	daemon.Config = mine.Config
	diffs, err := audit.Diff(mine, daemon)
	if err != nil {
		return nil, problemf("%v", err)
	}
	return &diffOutput{Against: "daemon", Position: s.Position, Differences: diffs}, nil
}

// liveView asks the daemon for the views of every run the rebuilt state
// knows (or of run alone), in the shape of audit.View.
func liveView(ctx context.Context, b Broker, s *projections.State, run string) (audit.View, error) {
	v := audit.View{Runs: []audit.RunView{}}
	if err := call(ctx, b, "query.slots", map[string]any{}, &v.Slots); err != nil {
		return v, err
	}
	page, _ := s.Runs(projections.RunFilter{})
	for _, r := range page.Runs {
		if run != "" && r.RunID != run {
			continue
		}
		rv, err := fetchRun(ctx, b, r.RunID)
		if err != nil {
			return v, err
		}
		v.Runs = append(v.Runs, rv)
	}
	return v, nil
}

// fetchRun reads one run's views from the daemon.
// fetchRun asks the daemon for a run's views: all of them, or only the
// queries named in only (a one-table view needs one round trip, not four).
func fetchRun(ctx context.Context, b Broker, runID string, only ...string) (audit.RunView, error) {
	var rv audit.RunView
	p := map[string]any{"runId": runID}
	var tasks struct {
		Tasks []projections.Task `json:"tasks"`
	}
	var dels struct {
		Delegations []projections.Delegation `json:"delegations"`
	}
	var ledger struct {
		Accounts []projections.Account `json:"accounts"`
	}
	for _, q := range []struct {
		method string
		into   any
	}{{"query.run", &rv.Run}, {"query.tasks", &tasks}, {"query.delegations", &dels}, {"query.ledger", &ledger}} {
		if len(only) > 0 && !slices.Contains(only, q.method) {
			continue
		}
		if err := call(ctx, b, q.method, p, q.into); err != nil {
			return rv, err
		}
	}
	rv.Tasks, rv.Delegations, rv.Ledger = tasks.Tasks, dels.Delegations, ledger.Accounts
	return rv, nil
}
