package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

type replayFlags struct {
	run     string
	to      uint64
	at      string
	explain bool
	diff    bool
	diffMax int
}

// defaultDiffMax is how many differences --diff lists unless --diff-max says otherwise: enough to see what differs,
// where a damaged store can differ at millions of places.
const defaultDiffMax = 100

// replayOutput is replay's --json document. Its Timeline is written entry by entry (printReplayJSON) and is empty
// here: replay does not hold it.
type replayOutput struct {
	Head      uint64             `json:"head"`
	Position  uint64             `json:"position"`
	Run       string             `json:"run,omitempty"`
	Timeline  []audit.Entry      `json:"timeline"`
	Decisions []audit.Decision   `json:"decisions,omitempty"`
	Drift     int                `json:"drift"`
	Diff      *diffOutput        `json:"diff,omitempty"`
	Slots     projections.Slots  `json:"slots"`
	Config    projections.Config `json:"config"`
	Runs      []projections.Run  `json:"runs"`
	Explained bool               `json:"explained"`

	// decisions are the decisions --explain re-ran, in their spool (Decisions stays empty): written where
	// Decisions goes.
	decisions *decisionSpool
}

// diffOutput is the comparison --diff made.
type diffOutput struct {
	Against  string `json:"against"` // "snapshot" or "daemon"
	Position uint64 `json:"position"`
	// SnapshotPosition is where the snapshot was taken (against snapshot).
	SnapshotPosition uint64 `json:"snapshotPosition,omitempty"`
	// Differences lists the first --diff-max differences, in document order; Total counts them all.
	Differences []audit.Difference `json:"differences"`
	Total       int                `json:"total"`
}

func (a *app) replayCmd() *cobra.Command {
	var f replayFlags
	c := &cobra.Command{
		Use:   "replay",
		Short: "Rebuild state from the log and print each run's timeline",
		Long: `replay opens the store read-only, rebuilds the projections up to --to (a
position) or --at (an RFC3339 time) and prints the timeline: position, time,
actor, event type and what it meant.

--at stops before the first event, in log order, whose time is later: every
event replayed is at or before the time. Times need not follow positions: an
imported event (pi-crew's history) carries its source's time, earlier than the
events written before it, so events at or before the time may lie after the
stop; they are not replayed.

--explain re-runs every recorded decision (admissions and rejections,
settlements, expiries of delegations and questions, config changes, a run
budget's thresholds crossed, job, quota and policy refusals, a revocation
that closed its task's question) with today's code against the state just
before it and the config then in force, says which rule decided it, and
exits 1 when today's code decides any of them differently (policy drift). A
decision imported from another system (pi-crew's history) is that system's:
it is explained from its record and not decided again.

--diff compares the rebuilt state with the newest snapshot, or with the live
daemon's views when --socket is given (the token from --token-file or
<data>/admin.token), and exits 1 on any difference, or when the store has
no snapshot or one crewd does not load (another build's, the state at
another position than it is stored at): there is nothing to compare. A run one side holds
and the other does not is one difference, absent from that side. It lists
the first --diff-max differences (100 unless given; 0 lists every one) and
says how many there are in all: a damaged store can differ at millions of
places. The texts and names
crewd sent without (textsOmitted, namesOmitted: an item larger than its
frame) are not compared; a task's dependsOn it sent without is read page by
page and compared. A finished run gone cold is compared as crewd reads it
back: from its view or, without one, folded from its own events alone. So
folded, a run keeps an admission the full fold ignores, of a subId another
run's delegation held (an import could record one before crewd refused it):
that delegation and its task show as differences, as crewd shows them.

A damaged store (a record or a table block that fails its checksum) is
reported as corrupt and exits 1. A read of the store that fails (an I/O
error) is not damage: replay says it could not read the store and exits 3,
as when the store does not open.

The timeline is not held in memory: once the replay has stopped (and
--diff has compared), replay reads the selection's events again and prints
them as it reads, so a store of millions of events needs the memory of its
state, not of its timeline. A read of that second pass that fails ends the
output where it was. The decisions --explain re-runs wait for their turn,
after the state, in a file of the temporary directory ($TMPDIR), not in
memory; the file is gone when replay ends.

The store must not be held by a running crewd (Pebble locks it even for
readers): stop crewd, or replay a backup made with 'crewctl backup'. With --nats
it replays a JetStream cluster's log (a temporary copy of the stream).`,
		Args: runFlagOnly("replay"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// NB: 0 is the flag's "not given" (the head); given, it names no
			// position, and replaying the whole log in its place would answer
			// a question nobody asked.
			if cmd.Flags().Changed("to") && f.to == 0 {
				return usagef("replay: --to 0 is no position: positions start at 1")
			}
			if f.diffMax < 0 {
				return usagef("replay: --diff-max %d: give how many differences to list, or 0 for every one", f.diffMax)
			}
			return a.replay(cmd.Context(), f, cmd.Flags().Changed("socket"))
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.run, "run", "", "only this run's timeline and decisions")
	fl.Uint64Var(&f.to, "to", 0, "stop after this position")
	fl.StringVar(&f.at, "at", "", "stop before the first event later than this RFC3339 time")
	fl.BoolVar(&f.explain, "explain", false, "re-run every recorded decision and report policy drift")
	fl.BoolVar(&f.diff, "diff", false, "compare the rebuilt state with the newest snapshot or the live daemon")
	fl.IntVar(&f.diffMax, "diff-max", defaultDiffMax, "with --diff, list at most this many differences and count the "+
		"rest (0: list every one)")
	return c
}

func (a *app) replay(ctx context.Context, f replayFlags, live bool) error {
	o := audit.ReplayOptions{Run: f.run, To: f.to, Explain: f.explain}
	if f.at != "" {
		if f.to != 0 {
			return usagef("replay: --to and --at exclude each other")
		}
		at, err := time.Parse(time.RFC3339Nano, f.at)
		if err != nil {
			return usagef("replay: --at %q is not an RFC3339 time", f.at)
		}
		o.At = &at
	}
	dir, done, err := a.storeToRead(ctx)
	if err != nil {
		return err
	}
	defer done()
	l, err := a.open(dir)
	if err != nil {
		return err
	}
	defer l.Close()
	// NB: the timeline is not kept: it is read a second time as it is printed (printTimeline), once the stop, the
	// state and the columns' widths are known and nothing that could fail is left to do.
	out := replayOutput{Run: f.run, Timeline: []audit.Entry{}, Explained: f.explain}
	var widths timelineWidths
	if !a.json {
		o.Timeline = widths.fit
	}
	if f.explain {
		spool, err := newDecisionSpool(a.json)
		if err != nil {
			return problemf("replay --explain: keep the decisions: %v", err)
		}
		defer spool.close()
		o.Decision, out.decisions = spool.add, spool
	}
	bar := newProgress(a.io, "replay")
	o.Progress = bar.update
	res, err := audit.Replay(l, o)
	bar.finish()
	if readFailed(err) {
		return unreadable("replay", dir, err)
	}
	if err != nil {
		return problemf("%v", err)
	}
	if out.decisions != nil && out.decisions.failed() != nil {
		return problemf("replay --explain: keep the decisions: %v", out.decisions.failed())
	}
	s := res.State
	if f.run != "" {
		if _, ok := s.Run(f.run); !ok {
			return problemf("replay: run %s not found at position %d", f.run, s.Position)
		}
	}
	out.Head, out.Position = res.Head, s.Position
	out.Drift = res.Drift()
	out.Slots, out.Config = s.Slots(), s.Config()
	page, _ := s.Runs(projections.RunFilter{})
	for _, r := range page.Runs {
		if f.run == "" || r.RunID == f.run {
			out.Runs = append(out.Runs, r)
		}
	}
	if f.diff {
		if out.Diff, err = a.diffState(ctx, dir, l, s, f.run, live, f.diffMax); err != nil {
			return err
		}
	}
	if err := a.printReplayOutput(l, out, widths); err != nil {
		if readFailed(err) && !errors.As(err, new(outputFailed)) {
			return unreadable("replay", dir, err)
		}
		return problemf("%v", err)
	}
	switch {
	case out.Drift > 0:
		return found(fmt.Sprintf("policy drift in %d decision(s)", out.Drift))
	case out.Diff != nil && out.Diff.Total > 0:
		return found(fmt.Sprintf("%d difference(s) with the %s", out.Diff.Total, out.Diff.Against))
	}
	return nil
}

// readFailed reports whether err, an error of replaying the store (audit.Replay, audit.CompareSnapshot), is a read
// of it that failed (3: nothing was replayed or compared) rather than a finding (1): damage, an event of a newer
// build, a snapshot this build cannot load, a stop the log cannot answer for, a position it does not hold.
func readFailed(err error) bool {
	for _, finding := range []error{eventlog.ErrCorrupt, eventlog.ErrNotFound, projections.ErrNewerEvent,
		projections.ErrBadSnapshot, audit.ErrPastHead, audit.ErrInsideDecision} {
		if errors.Is(err, finding) {
			return false
		}
	}
	return err != nil
}

// printReplayHead writes the text output's first line, above the timeline.
func printReplayHead(w screen, out replayOutput) {
	w.printf("replayed to position %d of %d", out.Position, out.Head)
	if out.Run != "" {
		w.printf(", run %s", out.Run)
	}
	w.printf("\n")
}

// printReplayTail writes the text output below the timeline: the state, the decisions and the differences. An error
// is of reading the decisions' spool.
func printReplayTail(w screen, out replayOutput) error {
	w.printf("\nstate at %d: %d run(s), slots %d/%d held, config %s\n", out.Position, len(out.Runs),
		out.Slots.Held, out.Slots.Capacity, audit.ConfigSummary(out.Config))
	if out.Explained {
		w.printf("\ndecisions re-run with today's code: %d, drift: %d\n", out.decisions.n, out.Drift)
		if err := out.decisions.copyTo(w.w); err != nil {
			return err
		}
	}
	if out.Diff != nil {
		against := out.Diff.Against
		if out.Diff.SnapshotPosition > 0 {
			against = fmt.Sprintf("snapshot taken at %d", out.Diff.SnapshotPosition)
		}
		w.printf("\ndiff with the %s, compared at position %d: %d difference(s)\n", against, out.Diff.Position,
			out.Diff.Total)
		for _, df := range out.Diff.Differences {
			w.printf("  %s: rebuilt %s, %s %s\n", df.Path, df.Left, out.Diff.Against, df.Right)
		}
		if unlisted := out.Diff.Total - len(out.Diff.Differences); unlisted > 0 {
			w.printf("  … and %d more, not listed (--diff-max %d; 0 lists every one)\n", unlisted,
				len(out.Diff.Differences))
		}
	}
	return nil
}

// printDecision writes a decision --explain re-ran: how it was recorded, how today's code takes it, by which rule.
func printDecision(w screen, d audit.Decision) {
	subject := d.Subject
	if subject == "" {
		subject = "-"
	}
	mark := "ok   "
	if d.Drift {
		mark = "DRIFT"
	}
	w.printf("%s #%d %s %s %s by %s\n", mark, d.Position, d.Time.Format(time.RFC3339), d.Command, subject, d.Actor)
	w.printf("      recorded: %s\n", d.Recorded)
	if d.Drift {
		w.printf("      today:    %s\n", d.Today)
	}
	w.printf("      rule:     %s\n", d.Rule)
	for _, df := range d.Differences {
		w.printf("      differs at %s: recorded %s, today %s\n", df.Path, df.Left, df.Right)
	}
}
