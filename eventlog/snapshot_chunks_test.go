package eventlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// A snapshot of any size comes back byte for byte, whatever chunk boundary
// it ends on, and Verify counts it once.
func TestSnapshotChunksRoundTrip(t *testing.T) {
	l, _ := openWithEightEvents(t)
	defer l.Close()
	for i, size := range []int{0, 1, snapshotChunk - 1, snapshotChunk, snapshotChunk + 1, 3*snapshotChunk + 7} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			data := incompressible(size, uint64(i))
			pos := uint64(i + 1)
			require.NoError(t, l.SaveSnapshot(pos, data))
			s, err := l.LatestSnapshot()
			require.NoError(t, err)
			require.Equal(t, pos, s.Position)
			require.Equal(t, len(data), len(s.Data))
			require.Equal(t, data, s.Data)
			require.Equal(t, 1+snapshotChunks(size), countKeys(t, l, prefixSnapshot), "the header and one key per chunk; the older snapshot excised")
			rep, err := l.Verify(nil)
			require.NoError(t, err)
			require.Equal(t, 1, rep.Snapshots)
		})
	}
}

// A store written before chunks holds the whole snapshot under one key: it
// is read and verified as before, and the next save replaces it.
func TestSnapshotWrittenWholeIsReadAndReplaced(t *testing.T) {
	l, _ := openWithEightEvents(t)
	defer l.Close()
	whole := incompressible(3*snapshotChunk, 9)
	require.NoError(t, l.db.Set(snapshotKey(4), seal(whole), pebble.Sync))
	s, err := l.LatestSnapshot()
	require.NoError(t, err)
	require.Equal(t, Snapshot{Position: 4, Data: whole}, s)
	rep, err := l.Verify(nil)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Snapshots)

	require.NoError(t, l.SaveSnapshot(6, []byte("six")))
	s, err = l.LatestSnapshot()
	require.NoError(t, err)
	require.Equal(t, Snapshot{Position: 6, Data: []byte("six")}, s)
	require.Equal(t, 2, countKeys(t, l, prefixSnapshot), "the whole one excised")
}

// A snapshot whose chunks do not add up is corrupt, to LatestSnapshot and
// to Verify alike: never handed out short, long or out of order.
func TestSnapshotChunksThatDoNotAddUpAreCorrupt(t *testing.T) {
	const pos = 5
	data := incompressible(3*snapshotChunk+7, 3)
	header := func(size uint64, n uint32) []byte {
		p := binary.BigEndian.AppendUint64(nil, size)
		p = binary.BigEndian.AppendUint32(p, n)
		return seal(binary.BigEndian.AppendUint32(p, crc32.Checksum(data, castagnoli)))
	}
	for _, c := range []struct {
		name  string
		spoil func(t *testing.T, b *pebble.Batch)
	}{
		{"a middle chunk missing", func(t *testing.T, b *pebble.Batch) {
			require.NoError(t, b.Delete(snapshotChunkKey(pos, 2), nil))
		}},
		{"the last chunk missing", func(t *testing.T, b *pebble.Batch) {
			require.NoError(t, b.Delete(snapshotChunkKey(pos, 4), nil))
		}},
		{"the header missing", func(t *testing.T, b *pebble.Batch) {
			require.NoError(t, b.Delete(snapshotChunkKey(pos, 0), nil))
		}},
		{"a chunk past the last", func(t *testing.T, b *pebble.Batch) {
			require.NoError(t, b.Set(snapshotChunkKey(pos, 5), seal([]byte("x")), nil))
		}},
		{"the header claims a byte less", func(t *testing.T, b *pebble.Batch) {
			require.NoError(t, b.Set(snapshotChunkKey(pos, 0), header(uint64(len(data)-1), 4), nil))
		}},
		{"the header claims a chunk more", func(t *testing.T, b *pebble.Batch) {
			require.NoError(t, b.Set(snapshotChunkKey(pos, 0), header(uint64(len(data)), 5), nil))
		}},
		{"the header claims everything", func(t *testing.T, b *pebble.Batch) {
			require.NoError(t, b.Set(snapshotChunkKey(pos, 0), header(1<<63, 1<<32-1), nil))
		}},
		{"the header claims terabytes the chunks do not bear out", func(t *testing.T, b *pebble.Batch) {
			require.NoError(t, b.Set(snapshotChunkKey(pos, 0), header(1<<22*snapshotChunk, 1<<22), nil))
		}},
		{"a whole snapshot and chunks at one position", func(t *testing.T, b *pebble.Batch) {
			require.NoError(t, b.Set(snapshotKey(pos), seal(data), nil))
		}},
		{"two chunks swapped", func(t *testing.T, b *pebble.Batch) {
			require.NoError(t, b.Set(snapshotChunkKey(pos, 1), seal(data[snapshotChunk:2*snapshotChunk]), nil))
			require.NoError(t, b.Set(snapshotChunkKey(pos, 2), seal(data[:snapshotChunk]), nil))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, _ := openWithEightEvents(t)
			defer l.Close()
			require.NoError(t, l.SaveSnapshot(pos, data))
			b := l.db.NewBatch()
			c.spoil(t, b)
			require.NoError(t, b.Commit(pebble.Sync))

			_, err := l.LatestSnapshot()
			require.ErrorIs(t, err, ErrCorrupt)
			_, err = l.Verify(nil)
			require.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

// openWithEightEvents opens an in-memory log holding eight events, so
// that a snapshot has positions to stand at.
func openWithEightEvents(t *testing.T) (*Log, vfs.FS) {
	t.Helper()
	l, fs := openMem(t)
	_, err := l.Append(Write{Events: evs("a", 8)})
	require.NoError(t, err)
	return l, fs
}

// countKeys counts the keys under prefix.
func countKeys(t *testing.T, l *Log, prefix byte) int {
	t.Helper()
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
	require.NoError(t, err)
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	require.NoError(t, it.Error())
	return n
}

// The step to FormatChunkedSnapshots rewrites a snapshot stored whole in
// chunks, byte for byte, drops one that fails its seal, and is idempotent.
func TestChunkSnapshotsStep(t *testing.T) {
	for _, c := range []struct {
		damaged bool
		size    int
		batch   int // upgradeChunk
	}{
		{false, 2*snapshotChunk + 11, 1024},
		{true, 2*snapshotChunk + 11, 1024},
		// More keys than one of the step's batches holds: a snapshot's
		// chunks commit together all the same.
		{false, 20*snapshotChunk + 1, 7},
	} {
		damaged := c.damaged
		t.Run(fmt.Sprint("damaged=", damaged, "/size=", c.size), func(t *testing.T) {
			defer func(n int) { upgradeChunk = n }(upgradeChunk)
			upgradeChunk = c.batch
			l, fs := openWithEightEvents(t)
			whole := incompressible(c.size, 5)
			v := seal(whole)
			if damaged {
				v[len(v)-1] ^= 1
			}
			require.NoError(t, l.db.Set(snapshotKey(6), v, pebble.Sync))
			require.NoError(t, l.db.Set(keyFormat, encodeFormat(FormatPrincipalOutcomes), pebble.Sync))
			require.NoError(t, l.Close())

			l, err := Open("db", &Options{FS: fs, AllowOlderFormat: true})
			require.NoError(t, err)
			defer l.Close()
			var rewritten []int
			step := func(u *Upgrade) error {
				n, err := u.ChunkSnapshots()
				rewritten = append(rewritten, n)
				return err
			}
			// A run a crash interrupted after its writes, before the marker.
			interrupted := &Upgrade{l: l, b: l.db.NewBatch()}
			require.NoError(t, step(interrupted))
			require.NoError(t, interrupted.b.Commit(pebble.Sync))
			require.NoError(t, interrupted.b.Close())
			require.NoError(t, l.Upgrade(FormatPrincipalOutcomes, FormatChunkedSnapshots, step, nil))
			f, err := l.Format()
			require.NoError(t, err)
			require.Equal(t, FormatChunkedSnapshots, f)

			s, err := l.LatestSnapshot()
			if damaged {
				require.Equal(t, []int{0, 0}, rewritten)
				require.ErrorIs(t, err, ErrNotFound, "the damaged snapshot is dropped")
				require.Zero(t, countKeys(t, l, prefixSnapshot))
				return
			}
			require.Equal(t, []int{1, 0}, rewritten, "rewritten once, found chunked the second time")
			require.NoError(t, err)
			require.Equal(t, Snapshot{Position: 6, Data: whole}, s)
			require.Equal(t, 1+snapshotChunks(len(whole)), countKeys(t, l, prefixSnapshot))
			rep, err := l.Verify(nil)
			require.NoError(t, err)
			require.Equal(t, 1, rep.Snapshots)
		})
	}
}

// TestChunkSnapshotsStepInterrupted: the step to FormatChunkedSnapshots commits its writes in batches; one that
// stopped part-way (an error, a crash) after a batch holding some of a snapshot's chunks left them beside the whole
// snapshot, which readers take for damage ("a key past its last chunk"): verify called a store that only needed
// migrate run again corrupt. A snapshot's chunks and the deletion of its whole key commit together.
func TestChunkSnapshotsStepInterrupted(t *testing.T) {
	defer func(n int) { upgradeChunk = n }(upgradeChunk)
	upgradeChunk = 7
	l, fs := openWithEightEvents(t)
	whole := incompressible(20*snapshotChunk+1, 5)
	require.NoError(t, l.db.Set(snapshotKey(6), seal(whole), pebble.Sync))
	require.NoError(t, l.db.Set(keyFormat, encodeFormat(FormatPrincipalOutcomes), pebble.Sync))
	require.NoError(t, l.Close())

	l, err := Open("db", &Options{FS: fs, AllowOlderFormat: true})
	require.NoError(t, err)
	boom := errors.New("boom")
	err = l.Upgrade(FormatPrincipalOutcomes, FormatChunkedSnapshots, func(u *Upgrade) error {
		_, err := u.ChunkSnapshots()
		require.NoError(t, err)
		return boom
	}, nil)
	require.ErrorIs(t, err, boom)
	require.NoError(t, l.Close())

	ro, err := Open("db", &Options{FS: fs, ReadOnly: true})
	require.NoError(t, err)
	f, err := ro.Format()
	require.NoError(t, err)
	require.Equal(t, FormatPrincipalOutcomes, f)
	_, err = ro.Verify(nil)
	require.NoError(t, err, "a store whose step stopped part-way is not damaged")
	s, err := ro.LatestSnapshot()
	require.NoError(t, err)
	require.Equal(t, Snapshot{Position: 6, Data: whole}, s)
	require.NoError(t, ro.Close())

	l, err = Open("db", &Options{FS: fs, AllowOlderFormat: true})
	require.NoError(t, err)
	defer l.Close()
	require.NoError(t, l.Upgrade(FormatPrincipalOutcomes, FormatChunkedSnapshots, func(u *Upgrade) error {
		_, err := u.ChunkSnapshots()
		return err
	}, nil))
	s, err = l.LatestSnapshot()
	require.NoError(t, err)
	require.Equal(t, Snapshot{Position: 6, Data: whole}, s)
	_, err = l.Verify(nil)
	require.NoError(t, err)
}

// TestChunkerWritesWhatWriteSnapshotChunksWrites: a snapshot given to the
// chunker in pieces of any size, across the chunks' boundaries or not, is
// stored as the same keys and values as the same bytes given whole.
func TestChunkerWritesWhatWriteSnapshotChunksWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, size := range []int{0, 5, snapshotChunk - 1, snapshotChunk, snapshotChunk + 1, 3*snapshotChunk + 17} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.IntN(256))
		}
		want := snapshotValues(t, 9, data)
		for _, piece := range []int{1, 7, 4096, snapshotChunk, 1 << 20} {
			var c chunker
			for p := data; len(p) > 0; p = p[min(piece, len(p)):] {
				n, err := c.Write(p[:min(piece, len(p))])
				require.NoError(t, err)
				require.Equal(t, min(piece, len(p)), n)
			}
			got := map[string][]byte{}
			require.NoError(t, c.writeSnapshot(mapWriter(got), 9))
			require.Equal(t, want, got, "%d bytes in pieces of %d", size, piece)
		}
	}
}

// snapshotValues is the keys and values writeSnapshotChunks writes.
func snapshotValues(t *testing.T, pos uint64, data []byte) map[string][]byte {
	t.Helper()
	kv := map[string][]byte{}
	require.NoError(t, writeSnapshotChunks(mapWriter(kv), pos, data))
	return kv
}

type mapWriter map[string][]byte

func (m mapWriter) Set(k, v []byte) error { m[string(k)] = bytes.Clone(v); return nil }

// FuzzSnapshotChunksNeverHandOutOtherBytes stores a snapshot of 0..3
// chunks and more, spoils its keys by a list of operations on whole sealed
// values (one dropped, one chunk's value put under another chunk's key or
// another position's, the header claiming other sizes or counts, a whole
// snapshot of the pre-chunk layout beside the chunks), and reads every
// snapshot back as Verify and a start-up do: each snapshot read is the
// bytes written, byte for byte, or the read fails with ErrCorrupt. A
// value's seal is checked on its own; what these operations test is that
// the chunks add up.
func FuzzSnapshotChunksNeverHandOutOtherBytes(f *testing.F) {
	f.Add(uint32(10), []byte{})
	f.Add(uint32(snapshotChunk+1), []byte{0, 2, 0})
	f.Add(uint32(3*snapshotChunk+7), []byte{1, 1, 2, 1, 2, 1})
	f.Add(uint32(2*snapshotChunk), []byte{3, 2, 0, 3, 2, 1, 3, 2, 2})
	f.Add(uint32(2*snapshotChunk-1), []byte{4, 0xff, 0})
	f.Add(uint32(5), []byte{2, 0, 0})
	const pos = 5
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	require.NoError(f, err)
	f.Cleanup(func() { db.Close() })
	var data []byte
	f.Fuzz(func(t *testing.T, size uint32, ops []byte) {
		size %= 3*snapshotChunk + 8
		if len(data) != int(size) {
			data = incompressible(int(size), 1)
		}
		kv := snapshotValues(t, pos, data)
		n := uint32(snapshotChunks(int(size)))
		b := db.NewBatch()
		require.NoError(t, b.DeleteRange([]byte{prefixSnapshot}, []byte{prefixSnapshot + 1}, nil))
		for k, v := range kv {
			require.NoError(t, b.Set([]byte(k), v, nil))
		}
		for ; len(ops) >= 3; ops = ops[3:] {
			i, j := uint32(ops[1])%(n+2), uint32(ops[2])%(n+2)
			switch ops[0] % 5 {
			case 0: // a key dropped
				require.NoError(t, b.Delete(snapshotChunkKey(pos, i), nil))
			case 1: // chunk j's value under chunk i's key
				if v, ok := kv[string(snapshotChunkKey(pos, j))]; ok {
					require.NoError(t, b.Set(snapshotChunkKey(pos, i), v, nil))
				}
			case 2: // the whole snapshot, as before chunks, at pos
				require.NoError(t, b.Set(snapshotKey(pos), seal(data), nil))
			case 3: // chunk j's value under chunk i's key of the next position
				if v, ok := kv[string(snapshotChunkKey(pos, j))]; ok {
					require.NoError(t, b.Set(snapshotChunkKey(pos+1, i), v, nil))
				}
			case 4: // a header claiming other sizes and counts
				p := binary.BigEndian.AppendUint64(nil, uint64(int64(size)+int64(int8(ops[1]))))
				p = binary.BigEndian.AppendUint32(p, n+uint32(int8(ops[2])))
				p = binary.BigEndian.AppendUint32(p, crc32.Checksum(data, castagnoli))
				require.NoError(t, b.Set(snapshotChunkKey(pos, 0), seal(p), nil))
			}
		}
		require.NoError(t, b.Commit(pebble.NoSync))
		_, err := eachSnapshot(db, pos+1, func(at uint64, got []byte) {
			require.Equal(t, len(data), len(got), "snapshot at %d", at)
			require.True(t, bytes.Equal(data, got), "snapshot at %d", at)
		})
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
		}
	})
}

// A snapshot is stored in chunks of 64 KiB, doc.go's number and part of the format (the sizes here are literal, not
// snapshotChunk): 64 KiB take one chunk, a byte more a second, and every chunk but the last holds 64 KiB.
func TestSnapshotChunksAre64KiB(t *testing.T) {
	l, _ := openWithEightEvents(t)
	defer l.Close()
	for _, c := range []struct {
		size   int
		chunks []int
	}{
		{64 << 10, []int{64 << 10}},
		{64<<10 + 1, []int{64 << 10, 1}},
		{3 * 64 << 10, []int{64 << 10, 64 << 10, 64 << 10}},
	} {
		require.NoError(t, l.SaveSnapshot(5, incompressible(c.size, 1)))
		var got []int
		for i := uint32(1); ; i++ {
			v, closer, err := l.db.Get(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64([]byte{'n'}, 5), i))
			if errors.Is(err, pebble.ErrNotFound) {
				break
			}
			require.NoError(t, err)
			p, err := unseal(nil, v)
			require.NoError(t, err)
			got = append(got, len(p))
			require.NoError(t, closer.Close())
		}
		require.Equal(t, c.chunks, got, "a snapshot of %d bytes", c.size)
	}
}
