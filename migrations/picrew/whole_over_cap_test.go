package picrew

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAWholeFileOverTheCapCostsAStatAPass: a manifest.json, tasks.json or delivery.json larger than maxWholeFile (a
// run's workers write them) was opened at every pass it had changed since the last read, which for a file past the
// cap was every pass: refused unread, it never became the file last read. A delivery.json a worker grows with its
// messages is one. Its stat tells its size: a pass stats it, and opens it only once it is within the cap again,
// reported once while it is not.
func TestAWholeFileOverTheCapCostsAStatAPass(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
	}{
		{name: "manifest.json", reason: "manifest unreadable, the last one read stands: %v"},
		{name: "tasks.json", reason: "tasks.json not read, the tasks read before stand: %v"},
		{name: "mailbox/delivery.json", reason: deliveryUnreadable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := newRoot(t)
			a := newRun(t, root, runA)
			require.NoError(t, a.AddTask("01_plan", "planner"))
			require.NoError(t, a.SetStatus("running"))
			first, err := a.Message("01_plan", "hello")
			require.NoError(t, err)
			p := filepath.Join(a.Dir, tc.name)
			sink := newMemSink()
			_, pass, reported := stepFollower(t, root.Dir, sink)
			pass()
			opens := countOpens(t, p)
			within, err := os.ReadFile(p)
			require.NoError(t, err)
			for i := range 5 {
				// NB: each message rewrites delivery.json (a new inode); the file then grows past the cap (holes: no
				// disk), by a byte a pass.
				_, err := a.Message("01_plan", fmt.Sprintf("note %d", i))
				require.NoError(t, err)
				if tc.name == "mailbox/delivery.json" {
					within, err = os.ReadFile(p)
					require.NoError(t, err)
				}
				require.NoError(t, os.Truncate(p, maxWholeFile+1+int64(i)))
				pass()
			}
			require.Zero(t, opens.Load(), "opens of a file past the cap")
			require.Equal(t, []string{fmt.Sprintf(tc.reason, &tooLargeError{limit: maxWholeFile})},
				reasonsFor(*reported, "state/runs/"+runA+"/"+tc.name), "reported once")

			// Within the cap again: read, once.
			require.NoError(t, os.WriteFile(p, within, 0o644))
			require.NoError(t, a.Deliver(first, "acknowledged"))
			pass()
			pass()
			require.Equal(t, int64(1), opens.Load(), "reads of the file within the cap again")
			require.Contains(t, mustImported(sink), "import:"+runA+":delivery:"+first+":acknowledged")
		})
	}
}
