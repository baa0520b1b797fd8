package main

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// diffState compares the rebuilt state with the newest snapshot of the
// store in dir (l), or with the live daemon's views when live is set.
func (a *app) diffState(ctx context.Context, dir string, l *eventlog.Log, s *projections.State, run string,
	live bool, most int) (*diffOutput, error) {
	if !live {
		d, err := audit.CompareSnapshot(l, s, run, most)
		switch {
		case errors.Is(err, eventlog.ErrNotFound):
			return nil, problemf("replay --diff: the store has no snapshot to compare with")
		case readFailed(err):
			return nil, unreadable("replay --diff", dir, err)
		case err != nil:
			return nil, problemf("replay --diff: %v", err)
		}
		return &diffOutput{Against: "snapshot", Position: d.Compared, SnapshotPosition: d.SnapshotPosition,
			Differences: d.Differences, Total: d.Total}, nil
	}
	b, err := a.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	daemon, omitted, slots, err := liveView(ctx, b, s, run)
	if err != nil {
		return nil, err
	}
	// The daemon's position and config are not queryable: compare what
	// the views show.
	mine := audit.ViewOf(s, run)
	omitted.apply(&mine)
	cutAsSent(&mine.Slots, slots)
	mine.Position, daemon.Position = 0, 0
	daemon.Config = mine.Config
	diffs, err := audit.DiffAtMost(mine, daemon, most)
	if err != nil {
		return nil, problemf("%v", err)
	}
	return &diffOutput{Against: "daemon", Position: s.Position, Differences: diffs.Listed, Total: diffs.Total}, nil
}

// liveView asks the daemon for the views of every run the rebuilt state
// knows (or of run alone), in the shape of audit.View, and lists after them
// every run only the daemon holds (not with run), by its summary alone:
// the rebuilt side has nothing of it to compare. It returns the pool as
// crewd sent it too, which may list only its first holders (cutAsSent).
func liveView(ctx context.Context, b Broker, s *projections.State, run string) (audit.View, omittedTexts,
	broker.WireSlots, error) {
	v := audit.View{Runs: []audit.RunView{}}
	omitted := omittedTexts{}
	var slots broker.WireSlots
	if err := call(ctx, b, "query.slots", map[string]any{}, &slots); err != nil {
		return v, omitted, slots, err
	}
	v.Slots = slots.Slots
	page, _ := s.Runs(projections.RunFilter{})
	for _, r := range page.Runs {
		if run != "" && r.RunID != run {
			continue
		}
		rv, err := fetchRun(ctx, b, r.RunID)
		if errors.As(err, new(runNotHeld)) {
			continue // NB: a difference, not a failure: the run is absent from the daemon's side
		}
		if err != nil {
			return v, omitted, slots, err
		}
		omitted.note(rv)
		v.Runs = append(v.Runs, rv.view())
	}
	if run != "" {
		return v, omitted, slots, nil
	}
	theirs, err := callPaged[broker.WireRun](ctx, b, "query.runs", "runs", "")
	for _, r := range theirs {
		if _, known := s.RunStatus(r.RunID); !known {
			v.Runs = append(v.Runs, audit.RunView{Run: r.Run})
		}
	}
	return v, omitted, slots, err
}

// view is v in audit's shape, without the flags.
func (v runViews) view() audit.RunView {
	rv := audit.RunView{Run: v.Run.Run, Ledger: v.Ledger}
	if v.Tasks != nil {
		rv.Tasks = make([]projections.Task, len(v.Tasks))
		for i, t := range v.Tasks {
			rv.Tasks[i] = t.Task
		}
	}
	if v.Delegations != nil {
		rv.Delegations = make([]projections.Delegation, len(v.Delegations))
		for i, d := range v.Delegations {
			rv.Delegations[i] = d.Delegation
		}
	}
	return rv
}

// fetchRun asks the daemon for a run's views: all of them, or only the
// queries named in only (a one-table view needs one query, not four). The
// paged queries are followed to their last page.
func fetchRun(ctx context.Context, b Broker, runID string, only ...string) (runViews, error) {
	var rv runViews
	want := func(method string) bool { return len(only) == 0 || slices.Contains(only, method) }
	var err error
	if want("query.run") {
		err = b.Call(ctx, "query.run", map[string]any{"runId": runID}, &rv.Run)
		notHeld := wire.CodeOf(err) == wire.CodeNoManifest
		if err != nil {
			err = brokerErr("query.run", err)
		}
		if notHeld {
			return rv, runNotHeld{err}
		}
	}
	if err == nil && want("query.tasks") {
		rv.Tasks, err = callPaged[broker.WireTask](ctx, b, "query.tasks", "tasks", runID)
		rv.Tasks = withRunIDs(rv.Tasks, runID, taskRunID)
		if err == nil {
			rv.dependsOnRead, err = readOmittedDependsOn(ctx, b, runID, rv.Tasks)
		}
	}
	if err == nil && want("query.delegations") {
		rv.Delegations, err = callPaged[broker.WireDelegation](ctx, b, "query.delegations", "delegations", runID)
		rv.Delegations = withRunIDs(rv.Delegations, runID, delegationRunID)
	}
	if err == nil && want("query.ledger") {
		rv.Ledger, err = fetchLedger(ctx, b, runID)
	}
	return rv, err
}

// runNotHeld is fetchRun's error when crewd holds no run of its id (no-manifest): a run the log holds and the daemon
// lost, or never had (one restored from an older backup), which replay --diff shows absent from the daemon's side.
type runNotHeld struct{ error }

func (e runNotHeld) Unwrap() error { return e.error }

// ledgerAccount is an account as query.ledger sends it: one too large for a frame comes without its history.
type ledgerAccount struct {
	projections.Account
	HistoryOmitted bool `json:"historyOmitted"`
}

// fetchLedger reads every account of the run and, for an account sent without its history, the history page by
// page (query.ledger {taskId}).
func fetchLedger(ctx context.Context, b Broker, runID string) ([]projections.Account, error) {
	accounts, err := callPaged[ledgerAccount](ctx, b, "query.ledger", "accounts", runID)
	out := make([]projections.Account, 0, len(accounts))
	for _, a := range accounts {
		if err == nil && a.HistoryOmitted {
			a.Reservations, a.Charges, err = fetchHistory(ctx, b, runID, a.TaskID)
		}
		out = append(out, a.Account)
	}
	return out, err
}

// fetchHistory reads one account's reservations and charges, following the cursor.
func fetchHistory(ctx context.Context, b Broker, runID, taskID string) (
	[]projections.Reservation, []projections.Charge, error) {
	var (
		res []projections.Reservation
		chg []projections.Charge
	)
	p := map[string]any{"runId": runID, "taskId": taskID, "limit": maxPageLimit}
	for {
		var h struct {
			Reservations []projections.Reservation `json:"reservations"`
			Charges      []projections.Charge      `json:"charges"`
			NextCursor   string                    `json:"nextCursor"`
		}
		if err := call(ctx, b, "query.ledger", p, &h); err != nil {
			return res, chg, err
		}
		res, chg = append(res, h.Reservations...), append(chg, h.Charges...)
		if h.NextCursor == "" {
			return res, chg, nil
		}
		if h.NextCursor == p["cursor"] {
			return res, chg, problemf("query.ledger: the daemon returned cursor %q again", h.NextCursor)
		}
		p["cursor"] = h.NextCursor
	}
}

// readOmittedDependsOn reads the dependsOn of each of tasks crewd sent without it page by page (query.tasks {taskId})
// into the task, which then shows it whole, and returns the ids of those tasks.
func readOmittedDependsOn(ctx context.Context, b Broker, runID string,
	tasks []broker.WireTask) (map[string]bool, error) {
	read := map[string]bool{}
	for i := range tasks {
		t := &tasks[i]
		if !t.DependsOnOmitted {
			continue
		}
		deps := []string{}
		p := map[string]any{"runId": runID, "taskId": t.TaskID, "limit": maxPageLimit}
		for {
			var page struct {
				DependsOn  []string `json:"dependsOn"`
				NextCursor string   `json:"nextCursor"`
			}
			if err := call(ctx, b, "query.tasks", p, &page); err != nil {
				return read, err
			}
			deps = append(deps, page.DependsOn...)
			if page.NextCursor == "" {
				break
			}
			if page.NextCursor == p["cursor"] || len(page.DependsOn) == 0 {
				return read, problemf("query.tasks: task %s's dependsOn after cursor %v moved on by nothing", t.TaskID,
					p["cursor"])
			}
			p["cursor"] = page.NextCursor
		}
		t.DependsOn, t.DependsOnOmitted, read[t.TaskID] = deps, false, true
	}
	return read, nil
}

// callPaged reads every page of a paged query of run runID, or of the
// daemon's with runID "" ({limit, cursor} → {<key>, nextCursor?}), and
// returns the items of all of them, in order.
func callPaged[T any](ctx context.Context, b Broker, method, key, runID string) ([]T, error) {
	all := []T{}
	p := map[string]any{"limit": maxPageLimit}
	if runID != "" {
		p["runId"] = runID
	}
	cursor := ""
	for {
		var page map[string]json.RawMessage
		if err := call(ctx, b, method, p, &page); err != nil {
			return all, err
		}
		var items []T
		if err := json.Unmarshal(page[key], &items); err != nil {
			return all, problemf("%s: %s: %v", method, key, err)
		}
		all = append(all, items...)
		var next string
		if c, ok := page["nextCursor"]; ok {
			if err := json.Unmarshal(c, &next); err != nil {
				return all, problemf("%s: nextCursor: %v", method, err)
			}
		}
		if next == "" {
			return all, nil
		}
		if next == cursor || len(items) == 0 {
			return all, problemf("%s: the daemon's page after cursor %q moved on by nothing", method, cursor)
		}
		cursor, p["cursor"] = next, next
	}
}

// maxPageLimit is the largest page the daemon's paged queries answer.
const maxPageLimit = 1000
