package natslog

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ConfirmHead passes while the stream holds nothing the writer's copy lacks — its own next group, staged and stored
// meanwhile, included — and is ErrFenced once another writer appended, even where the writer's own next batch, void
// behind the other's batch of the same size, ends the stream exactly where the writer's pipeline expects it to end.
// Each case counts the requests the barrier sent (a round trip each): one where the stream ends at the copy, two
// where it does not.
func TestConfirmHeadPassesOnlyWhileNoOtherWriterAppended(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setUp commits, stages and lets another writer append on the stream that a and b share; it returns the
		// groups a staged, to be waited for once the barrier answered.
		setUp  func(t *testing.T, a, b *Log) []*Staged
		fenced bool
		trips  int
	}{
		{"nothing appended since the copy's last", func(*testing.T, *Log, *Log) []*Staged { return nil }, false, 1},
		{"the writer's own next group stored meanwhile", func(t *testing.T, a, _ *Log) []*Staged {
			s, err := a.Stage(group1("next"))
			require.NoError(t, err)
			waitStreamEnd(t, a, a.Sequence()+2)
			return []*Staged{s}
		}, false, 2},
		{"another writer appended", func(t *testing.T, a, b *Log) []*Staged {
			_, err := b.Commit(group1("from-b"))
			require.NoError(t, err)
			return nil
		}, true, 2},
		{"another writer appended, the writer's next batch void behind it", func(t *testing.T, a, b *Log) []*Staged {
			_, err := b.Commit(group1("from-b"))
			require.NoError(t, err)
			refused, err := a.Stage(group1("refused"))
			require.NoError(t, err)
			void, err := a.Stage(group1("void"))
			require.NoError(t, err)
			// b's two messages, then a's second batch: fenced with the end of its first, which is b's end.
			waitStreamEnd(t, a, a.Sequence()+4)
			return []*Staged{refused, void}
		}, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := connect(t, startServer(t))
			a, b := openLog(t, js), openLog(t, js)
			_, err := a.Commit(group1("first"))
			require.NoError(t, err)
			_, err = b.CatchUp(context.Background())
			require.NoError(t, err)
			staged := tc.setUp(t, a, b)

			sent := a.js.Conn().Stats().OutMsgs
			confirmErr := a.ConfirmHead()
			if tc.fenced {
				require.ErrorIs(t, confirmErr, ErrFenced)
			} else {
				require.NoError(t, confirmErr)
			}
			require.Equal(t, tc.trips, int(a.js.Conn().Stats().OutMsgs-sent), "the barrier's requests")
			for _, s := range staged {
				_, err := s.Wait()
				require.Equal(t, tc.fenced, err != nil, "%v", err)
			}
		})
	}
}

// waitStreamEnd waits until the stream l writes to ends at sequence seq. NB: polled: nothing tells a writer that
// its staged batch is stored but the acknowledgement its Wait takes.
func waitStreamEnd(t *testing.T, l *Log, seq uint64) {
	t.Helper()
	require.Eventually(t, func() bool {
		info, err := l.stream.Info(context.Background())
		return err == nil && info.State.LastSeq == seq
	}, 10*time.Second, 5*time.Millisecond)
}
