package picrew

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestFollowReadsTheArchiveBeforeTheLiveFile: lines appended to events.jsonl just before pi-crew renamed it aside to
// an archive, read by no pass before the rotation, are older than every line of the new events.jsonl. The follower
// read the live file first (its name sorts first), so it reported the archive's unread seqs missing and recorded the
// new file's events before them: a delegation's settlement before its admission. It reads an archive's unread lines
// before the live file now, in seq order, each once, whether the follower went on or was restarted from its
// checkpoints between its last read and the rotation.
func TestFollowReadsTheArchiveBeforeTheLiveFile(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run("restart="+strconv.FormatBool(restart), func(t *testing.T) {
			root := newRoot(t)
			a := newRun(t, root, runA)
			steps := picrewtest.Lifecycle(a, 12)
			runSteps(t, steps[:14]) // up to the delegation's admission
			sink := newMemSink()
			fl, pass, reported := stepFollower(t, root.Dir, sink)
			for range 3 {
				pass() // read, sent and checkpointed
			}
			require.NotEmpty(t, fl.cks)
			read := a.Seq()
			if restart {
				cks, err := sink.Checkpoints(t.Context())
				require.NoError(t, err)
				fl, pass, reported = stepFollower(t, root.Dir, sink)
				for _, c := range cks {
					fl.cks[c.Path] = c
				}
			}
			runSteps(t, steps[14:18]) // appended to the live file, read by no pass
			require.Greater(t, a.Seq(), read)
			require.NoError(t, a.Rotate())
			runSteps(t, steps[18:]) // the new live file: the settlement, the end
			for range 4 {
				pass()
			}

			for _, s := range *reported {
				require.NotContains(t, s.Reason, "missing", "%s: %s", s.Path, s.Reason)
			}
			var seqs []uint64
			for _, id := range mustImported(sink) {
				if rest, ok := strings.CutPrefix(id, "import:"+runA+":seq:"); ok {
					seq, err := strconv.ParseUint(rest, 10, 64)
					require.NoError(t, err, id)
					seqs = append(seqs, seq)
				}
			}
			require.IsIncreasing(t, seqs, "recorded in seq order")
			require.Len(t, seqs, int(a.Seq()), "every event recorded")
			types := sink.eventTypes()
			require.Equal(t, 1, types[events.TypeDelegateAdmitted])
			require.Equal(t, 1, types[events.TypeDelegateCompleted])
			requireCopy(t, root.Dir, sink, copyOf{})
		})
	}
}
