package main

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// verifyOutput is verify's --json document.
type verifyOutput struct {
	OK         bool            `json:"ok"`
	Head       uint64          `json:"head"`
	HeadHash   string          `json:"headHash,omitempty"`
	Streams    int             `json:"streams"`
	Commands   int             `json:"commands"`
	Snapshots  int             `json:"snapshots"`
	Events     uint64          `json:"events"`
	Corrupt    *corruptOutput  `json:"corrupt,omitempty"`
	Problems   []audit.Problem `json:"problems"`
	FirstBad   uint64          `json:"firstBadPosition,omitempty"`
	Invariants bool            `json:"invariantsChecked"`
	// UnusableSnapshot is set when the newest snapshot is whole but crewd's next start will not load it, and folds
	// the log from position 1 instead: the store is ok all the same.
	UnusableSnapshot *unusableSnapshotOutput `json:"unusableSnapshot,omitempty"`
}

type unusableSnapshotOutput struct {
	Position uint64 `json:"position"`
	Reason   string `json:"reason"`
}

type corruptOutput struct {
	Position uint64 `json:"position"`
	Key      string `json:"key,omitempty"`
	Reason   string `json:"reason"`
}

func (a *app) verifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Check the store's integrity and the domain invariants",
		Long: `verify checks the store — the format marker; every record's checksum,
gapless positions, the hash chain and gapless stream versions; the head; the
stream index and the stream catalog; the outcome table both ways (every
outcome points at records of its command and principal, every record of a
command lies inside its command's outcome); the snapshot, the views, the
summaries, the tallies and the copy's source sequence (eventlog's package doc
lists each check) — and then folds the log and checks the domain invariants:
per task tokensSpent = Σ reservations + Σ charges, tokensGranted written once,
every reservation within what remained of the grant at its admission (and of
the run pool in nested budget mode), held slots = in-flight delegations, one
terminal event per ended delegation. It names the first bad position (for
damage outside the records, an outcome or a snapshot say, the damaged key) and
exits 1 on any problem.
A read of the store that fails (an I/O error) is not damage: verify says it
could not read the store and exits 3, as when the store does not open.

A snapshot that is whole but that crewd's next start will not load (another
build's format, bytes that are no snapshot, the state at another position)
is not a problem: crewd folds the log from position 1 instead. verify says so
on a warning line ("unusableSnapshot" with its position and the reason in
--json) and still exits 0.

With --nats it verifies a JetStream cluster's log: it copies the stream into a
temporary store (as every crewd does) and verifies that.`,
		Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, done, err := a.storeToRead(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			return a.verify(dir)
		},
	}
}

func (a *app) verify(dir string) error {
	out, err := a.verifyStore(dir, "verify")
	if err != nil {
		return err
	}
	if a.json {
		if err := a.printJSON(out); err != nil {
			return err
		}
	} else {
		printVerify(a.stdout(), out)
	}
	if !out.OK {
		return found(fmt.Sprintf("store %s has problems (%s)", dir, out.firstBad()))
	}
	return nil
}

// firstBad says where out's first problem is: its position, or, for damage outside the records (an outcome, a
// snapshot, an index, a table), which has none, the damaged key. NB: position 0 is no position of a log.
func (out verifyOutput) firstBad() string {
	switch {
	case out.FirstBad > 0:
		return fmt.Sprintf("first bad position %d", out.FirstBad)
	case out.Corrupt != nil && out.Corrupt.Key != "":
		return "damaged: " + out.Corrupt.Key
	}
	return "damaged"
}

// String says what is damaged, and where: "corrupt at position P (KEY): REASON", or for damage outside the records,
// "corrupt KEY: REASON".
func (c *corruptOutput) String() string { return "corrupt " + c.where() }

// where is what String says after "corrupt", as printVerify's CORRUPT line says it too.
func (c *corruptOutput) where() string {
	if c.Position > 0 {
		return fmt.Sprintf("at position %d (%s): %s", c.Position, c.Key, c.Reason)
	}
	return fmt.Sprintf("%s: %s", c.Key, c.Reason)
}

// verifyStore checks the store in dir: its integrity and, over the same
// pass, the domain invariants.
func (a *app) verifyStore(dir, label string) (verifyOutput, error) {
	out := verifyOutput{Problems: []audit.Problem{}}
	l, err := a.open(dir)
	if err != nil {
		var ce *eventlog.CorruptError
		if errors.As(err, &ce) {
			out.Corrupt = &corruptOutput{Position: ce.Position, Key: ce.Key, Reason: ce.Reason}
			out.FirstBad = ce.Position
			return out, nil
		}
		return out, err
	}
	defer l.Close()
	return a.verifyLog(l, dir, label)
}

// verifyLog is verifyStore over the open log l of the store in dir.
func (a *app) verifyLog(l *eventlog.Log, dir, label string) (verifyOutput, error) {
	out := verifyOutput{Problems: []audit.Problem{}}
	bar := newProgress(a.io, label)
	rep, err := audit.Verify(l, &audit.VerifyOptions{Progress: bar.update})
	bar.finish()
	var ce *eventlog.CorruptError
	switch {
	case errors.As(err, &ce):
		out.Corrupt = &corruptOutput{Position: ce.Position, Key: ce.Key, Reason: ce.Reason}
		out.FirstBad = ce.Position
		return out, nil
	case errors.Is(err, projections.ErrNewerEvent):
		// NB: not damage: the record is what was written, and a backup holds it too.
		return out, hinted(problemf("%s: %v", label, err),
			"verify it with the build that wrote it, or a newer one; this build cannot read the store")
	case errors.Is(err, eventlog.ErrCorrupt):
		out.Corrupt = &corruptOutput{Reason: err.Error()}
		return out, nil
	case err != nil:
		return out, unreadable(label, dir, err)
	}
	st, chk := rep.Store, rep.Check
	out.Head, out.HeadHash = st.Head, hex.EncodeToString(st.HeadHash[:])
	out.Streams, out.Commands, out.Snapshots = st.Streams, st.Commands, st.Snapshots
	out.Invariants, out.Events, out.Problems = true, chk.Events, chk.Problems
	if u := rep.UnusableSnapshot; u != nil {
		out.UnusableSnapshot = &unusableSnapshotOutput{Position: u.Position, Reason: u.Reason}
	}
	if len(chk.Problems) > 0 {
		out.FirstBad = chk.Problems[0].Position
	}
	out.OK = len(chk.Problems) == 0
	return out, nil
}

func printVerify(w screen, out verifyOutput) {
	if out.Corrupt != nil {
		w.printf("CORRUPT %s\n", out.Corrupt.where())
		return
	}
	w.printf("store ok: head %d (hash %.16s…), %d stream(s), %d command(s), %d snapshot(s)\n",
		out.Head, out.HeadHash, out.Streams, out.Commands, out.Snapshots)
	if u := out.UnusableSnapshot; u != nil {
		w.printf("warning: the snapshot at position %d is not usable (%s): "+
			"crewd ignores it and folds the log from position 1 at its next start\n", u.Position, u.Reason)
	}
	if len(out.Problems) == 0 {
		w.printf("invariants ok over %d event(s)\n", out.Events)
		return
	}
	w.printf("INVARIANTS BROKEN: %d problem(s), first at position %d\n", len(out.Problems), out.FirstBad)
	for _, p := range out.Problems {
		w.printf("  %s\n", p)
	}
}
