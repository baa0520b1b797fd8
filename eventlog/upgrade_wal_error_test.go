package eventlog

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// A format step's batch committed without a sync whose bytes fail to reach the WAL fails the step with ErrFailed
// (at the step's next batch or its synced last one), not a panic of Pebble on the next batch that meets the WAL's
// error; the marker is not written, and the reopened store is at the format the step started from, holding every
// acknowledged append, so that running the step again finishes it.
func TestFormatStepOnAFailingWALFailsStop(t *testing.T) {
	defer func(n int) { upgradeChunk = n }(upgradeChunk)
	upgradeChunk = 1            // NB: a batch per key
	big := make([]byte, 40<<10) // more than a WAL block (32 KiB): each batch of it moves the WAL to a new block
	for _, batches := range []int{1, 2, 8} {
		t.Run(fmt.Sprint("batches=", batches), func(t *testing.T) {
			mem := vfs.NewMem()
			toggle, injected := walWriteFaults()
			l := openTenAcked(t, mem, toggle)
			b := l.db.NewBatch()
			require.NoError(t, b.Set(keyFormat, encodeFormat(FormatPrincipalOutcomes), nil))
			require.NoError(t, l.commitSynced(b))

			step := func(u *Upgrade) error {
				toggle.On()
				if err := u.set(viewKey("run-0"), big); err != nil { // NB: its WAL write is Pebble's background's
					return err
				}
				<-injected
				toggle.Off()
				for i := 1; i < batches; i++ {
					if err := u.set(viewKey(fmt.Sprint("run-", i)), big); err != nil {
						return err
					}
				}
				return nil
			}
			var err error
			require.NotPanics(t, func() {
				err = l.Upgrade(FormatPrincipalOutcomes, FormatChunkedSnapshots, step, nil)
			})
			require.ErrorIs(t, err, ErrFailed)
			_ = l.Close()

			r, err := Open("db", &Options{FS: mem, AllowOlderFormat: true})
			require.NoError(t, err)
			defer r.Close()
			f, err := r.Format()
			require.NoError(t, err)
			require.Equal(t, FormatPrincipalOutcomes, f, "no marker over a step whose batch was lost")
			pos, _ := r.Head()
			require.EqualValues(t, 20, pos)
			for i := range 10 {
				_, err := r.Outcome("", fmt.Sprintf("ok-%d", i))
				require.NoError(t, err)
			}
		})
	}
}
