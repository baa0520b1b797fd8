package picrew

import (
	"errors"
	"fmt"
	"time"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// RunSummary is what the import did for one run.
type RunSummary struct {
	RunID    string `json:"runId"`
	Status   string `json:"status"`
	Tasks    int    `json:"tasks"`   // workflow tasks in tasks.json
	Shadows  int    `json:"shadows"` // shadow tasks in tasks.json
	Events   int    `json:"events"`  // pi-crew events read (after merging archives)
	Messages int    `json:"messages"`
	Steers   int    `json:"steers"`
	// Writes counts the import's commands for the run; Existing those
	// already in the store from an earlier import, Appended the events
	// written now.
	Writes   int `json:"writes"`
	Existing int `json:"existing"`
	Appended int `json:"appended"`
	// Foreign counts the events.jsonl lines without a crewlog counterpart,
	// kept as foreign.imported events.
	Foreign int `json:"foreign"`
}

// Summary is the report of Import.
type Summary struct {
	Runs     []RunSummary `json:"runs"`
	Appended int          `json:"appended"` // events written, all runs
	Existing int          `json:"existing"` // writes skipped as already imported
	Skipped  []Skipped    `json:"skipped"`
	// Unread are the runs not imported because a file or directory of theirs could not be read (each reported in
	// Skipped): nothing of them is recorded, and an import run again once they can be read imports them.
	Unread []string `json:"unread,omitempty"`
}

// Options tune Import; nil means defaults.
type Options struct {
	// DryRun plans and reports without writing.
	DryRun bool
	// Progress, when set, is called after each run with runs done and total.
	Progress func(done, total uint64)
	// Clock is the time recorded for an event pi-crew gave no time (and
	// its run no createdAt): the import's, as the daemon records its own
	// clock's for such an event a Follower sends (default time.Now).
	Clock func() time.Time
}

// progress tells o.Progress, if set, that done runs of total are.
func (o *Options) progress(done, total int) {
	if o.Progress != nil {
		o.Progress(uint64(done), uint64(total))
	}
}

// Import reads the pi-crew crew root at root and appends the equivalent
// crewlog events to l, one atomic append per run, reading each run's files
// when it imports the run. It is idempotent (see the
// package doc). A damaged file is reported in Summary.Skipped, never fatal;
// a run with a file that cannot be read, or whose id names a run of the
// store served through crewd's socket (servedRun), is reported there and
// not imported;
// an error is returned only when root is not a crew root or the store
// fails.
func Import(l *eventlog.Log, root string, opts *Options) (Summary, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	src := &source{root: root}
	defer src.files().close()
	ids, err := src.runIDs()
	if err != nil {
		return Summary{}, err
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	now := o.Clock().UnixNano()
	sum := Summary{Runs: []RunSummary{}}
	// The import is the engine's command: its ids are the engine
	// principal's, out of every client's reach.
	engine := events.EnginePrincipal().Key()
	slots := newSlotPool(l)
	for i, id := range ids {
		served, err := servedRun(l, id)
		if err != nil {
			return sum, err
		}
		var r *run
		if served {
			src.skip(id, "state/runs/"+id, 0, 0, servedReason, id)
		} else {
			// NB: read here, one run at a time: what the import holds is the run it imports, not the root.
			r = src.readRun(id, src.runDir(id))
		}
		if r == nil {
			o.progress(i+1, len(ids))
			continue
		}
		p := newPlanner(src, r, o.Clock)
		p.clockMs, p.slots = now/1e6, slots
		planned := p.plan()
		if slots.err != nil {
			return sum, slots.err
		}
		writes := takeable(l, src, r.id, planned)
		rs := RunSummary{RunID: r.id, Status: r.manifest.Status, Events: len(r.events), Messages: len(r.messages),
			Steers: len(r.steers), Writes: len(writes), Foreign: p.foreignCount}
		for _, t := range r.tasks {
			if t.shadow() {
				rs.Shadows++
			} else {
				rs.Tasks++
			}
		}
		var todo []eventlog.Write
		var items [][]Item
		for _, w := range writes {
			_, err := l.Outcome(engine, w.id)
			switch {
			case err == nil:
				rs.Existing++
				continue
			case !errors.Is(err, eventlog.ErrNotFound):
				return sum, fmt.Errorf("picrew: run %s: %w", r.id, err)
			}
			for j := range w.events {
				if w.events[j].Time == 0 {
					w.events[j].Time = now
				}
			}
			todo = append(todo, eventlog.Write{Principal: engine, CommandID: w.id, Events: w.events})
			items = append(items, w.items)
			rs.Appended += len(w.events)
		}
		if err := topUps(l, r.id, todo, items); err != nil {
			return sum, err
		}
		if len(todo) > 0 && !o.DryRun {
			if _, err := l.Append(todo...); err != nil {
				return sum, fmt.Errorf("picrew: run %s: %w", r.id, err)
			}
		}
		sum.Runs = append(sum.Runs, rs)
		sum.Appended += rs.Appended
		sum.Existing += rs.Existing
		o.progress(i+1, len(ids))
	}
	sum.Skipped, sum.Unread = src.skipped, src.unread
	if sum.Skipped == nil {
		sum.Skipped = []Skipped{}
	}
	return sum, nil
}

// takeable returns the writes whose events l takes, and reports the others
// (a payload above the store's limit: a huge message body, say), as the
// daemon refuses such a write and not the others: the run's other writes
// are appended, and a later import reports it again.
func takeable(l *eventlog.Log, src *source, runID string, writes []planned) []planned {
	out := writes[:0]
next:
	for _, w := range writes {
		for i := range w.events {
			if err := l.CheckEvent(&w.events[i]); err != nil {
				src.skip(runID, "state/runs/"+runID, 0, 0, "%s: not imported: %v", w.id, err)
				continue next
			}
		}
		out = append(out, w)
	}
	return out
}
