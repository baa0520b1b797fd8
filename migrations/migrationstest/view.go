package migrationstest

import (
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// update rewrites golden files instead of comparing (review the diff).
var update = flag.Bool("update", false, "rewrite the golden JSON files in testdata/")

// RunView is one run's read models.
type RunView struct {
	Run         projections.Run                  `json:"run"`
	Tasks       []projections.Task               `json:"tasks"`
	Delegations []projections.Delegation         `json:"delegations"`
	Ledger      []projections.Account            `json:"ledger"`
	Mailboxes   map[string][]projections.Message `json:"mailboxes"`
}

// View is the state a store folds to, as compared with the goldens.
type View struct {
	Runs   []RunView          `json:"runs"`
	Slots  projections.Slots  `json:"slots"`
	Config projections.Config `json:"config"`
}

// ViewOf folds the whole log (no snapshot) into a View.
func ViewOf(t testing.TB, l *eventlog.Log) View {
	t.Helper()
	s := projections.New()
	require.NoError(t, projections.Replay(s, l, 0))
	page, err := s.Runs(projections.RunFilter{})
	require.NoError(t, err)
	v := View{Runs: []RunView{}, Slots: s.Slots(), Config: s.Config()}
	for _, r := range page.Runs {
		rv := RunView{Run: r, Tasks: s.Tasks(r.RunID), Delegations: s.Delegations(r.RunID), Ledger: s.Ledger(r.RunID),
			Mailboxes: map[string][]projections.Message{}}
		for _, rcpt := range append([]string{events.RunInbox}, taskIDs(rv.Tasks)...) {
			mp, err := s.Mailbox(r.RunID, rcpt, projections.MailboxFilter{})
			require.NoError(t, err)
			if len(mp.Messages) > 0 {
				name := rcpt
				if name == events.RunInbox {
					name = "(run inbox)"
				}
				rv.Mailboxes[name] = mp.Messages
			}
		}
		v.Runs = append(v.Runs, rv)
	}
	return v
}

func taskIDs(ts []projections.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.TaskID
	}
	return out
}

// Golden compares v, as indented JSON, with the file at path (or writes it
// with -update).
func Golden(t testing.TB, path string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "no golden file: rerun with -update and review it")
	require.Equal(t, string(want), string(got), "differs from %s (rerun with -update and review the diff)", path)
}

// CopyDir copies a committed fixture store into a new directory under
// t.TempDir(), so tests never touch testdata.
func CopyDir(t testing.TB, from string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), filepath.Base(from))
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o600)
	})
	require.NoError(t, err)
	return to
}
