package eventlog

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestCheckpointNeedsCoversWhatTheCheckpointWrites: what CheckpointNeeds says a checkpoint writes on its
// destination's file system is at least what the checkpoint then writes there: on the store's mount of its file
// system the files it copies (its tables are hard links, which take no space), on another mount of it (a bind mount,
// a container's volume) and on another file system every file, as no hard link crosses mounts. A caller that refuses
// a checkpoint the disk has no room for asks it first.
func TestCheckpointNeedsCoversWhatTheCheckpointWrites(t *testing.T) {
	type destination struct {
		name    string
		parent  string
		storeFS bool
		linked  bool // the tables are hard links
	}
	dirs := []destination{{"the store's file system", t.TempDir(), true, true}}
	// NB: /dev/shm is a tmpfs on Linux, another file system than the temp directory's unless that is one too.
	if shm, err := os.MkdirTemp("/dev/shm", "crewlog-checkpoint-needs-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(shm) })
		dirs = append(dirs, destination{"another file system", shm, false, false})
	}
	// NB: a bind mount needs the privilege to mount; without it the case is left out.
	bound := t.TempDir()
	if err := unix.Mount(t.TempDir(), bound, "", unix.MS_BIND, ""); err == nil {
		t.Cleanup(func() { unix.Unmount(bound, unix.MNT_DETACH) })
		dirs = append(dirs, destination{"another mount of the store's file system", bound, true, false})
	}
	for _, tc := range dirs {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Open(filepath.Join(t.TempDir(), "store"), nil)
			require.NoError(t, err)
			t.Cleanup(func() { l.Close() })
			// NB: tables well over the write-ahead logs, current and recycled, which the store counts too: a count
			// that left them out would still cover a copy of them if they were smaller.
			for range 3 {
				for range 20 {
					_, err := l.Append(Write{Events: evs("a", 50)})
					require.NoError(t, err)
				}
				require.NoError(t, l.db.Flush()) // tables, which the store's file system links
			}
			// NB: the tables compacted to the bottom now, so that no compaction of the flushed ones runs between
			// CheckpointNeeds and the checkpoint and changes the tables the checkpoint links (a slow run, -race, saw
			// one replace them and the linked bytes no longer match the count).
			require.NoError(t, l.db.Compact(context.Background(), []byte{0}, []byte{0xff}, false))
			_, err = l.Append(Write{Events: evs("a", 50)})
			require.NoError(t, err)
			st, err := os.Stat(l.dir)
			require.NoError(t, err)
			parent, err := os.Stat(tc.parent)
			require.NoError(t, err)
			if storeFS := sameDevice(st, parent); storeFS != tc.storeFS {
				t.Skipf("%s is on the store's file system: %v", tc.parent, storeFS)
			}

			dest := filepath.Join(tc.parent, "copy")
			needs, err := l.CheckpointNeeds(dest)
			require.NoError(t, err)
			require.Equal(t, tc.storeFS, needs.StoreFS)
			require.NoError(t, l.Checkpoint(dest))
			var written, linked int64
			require.NoError(t, filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
				require.NoError(t, err)
				if d.IsDir() {
					return nil
				}
				fi, err := d.Info()
				require.NoError(t, err)
				if fi.Sys().(*syscall.Stat_t).Nlink > 1 {
					linked += fi.Size()
					return nil
				}
				written += fi.Size()
				return nil
			}))
			require.Positive(t, written)
			require.GreaterOrEqual(t, needs.Bytes, uint64(written), "the checkpoint wrote more than CheckpointNeeds said")
			if tc.linked {
				require.Positive(t, linked, "the tables are linked")
				all := l.StorageStats().DiskBytes
				require.LessOrEqual(t, needs.Bytes, all-uint64(linked), "the linked tables count as written")
			} else {
				require.Zero(t, linked, "nothing is linked across file systems")
			}
		})
	}
}
