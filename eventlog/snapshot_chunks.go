package eventlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/cockroachdb/pebble/v2"
)

// A snapshot is stored in chunks, each sealed under a key of its own:
//
//	'n' | pos:8 BE | 0:4 BE        sealed [size:8 BE | chunks:4 BE | crc32c(snapshot):4 BE]
//	'n' | pos:8 BE | i:4 BE        sealed bytes [(i-1)·C, min(i·C, size)) of the snapshot, 1 ≤ i ≤ chunks
//
// with C = snapshotChunk. Each chunk's seal catches a flipped byte in it;
// the header's size, count and checksum of the whole catch a chunk lost,
// added or moved. Why not one value: Pebble builds a table's data
// block in buffers of its own and reads the block back on ingestion, so a
// value of tens of megabytes was copied into freshly grown buffers,
// compressed whole and decompressed whole again at every save; chunks of C
// go through buffers of one block that are reused, and the ingestion reads
// the first block only. A follower of the head that seeks into the
// snapshot's table loads one chunk, not the snapshot.
//
// A store written before chunks holds one key 'n' | pos:8 BE with the whole
// snapshot sealed in its value; it is read as before, and the next save
// excises it.
const snapshotChunk = 64 << 10

// snapshotChunkKeyLen is the length of a chunk's key.
const snapshotChunkKeyLen = 1 + 8 + 4

// snapshotHeaderLen is the length of the header chunk's payload.
const snapshotHeaderLen = 8 + 4 + 4

// maxSnapshotChunks is the most chunks a header can name (256 TiB of
// snapshot at 64 KiB a chunk).
const maxSnapshotChunks = 1<<32 - 1

func snapshotChunkKey(pos uint64, i uint32) []byte {
	k := make([]byte, 0, snapshotChunkKeyLen)
	k = append(k, prefixSnapshot)
	k = binary.BigEndian.AppendUint64(k, pos)
	return binary.BigEndian.AppendUint32(k, i)
}

// snapshotChunks is how many data chunks a snapshot of size bytes takes.
func snapshotChunks(size int) int { return (size + snapshotChunk - 1) / snapshotChunk }

// writeSnapshotChunks writes data as the snapshot at pos through w: the
// header, then each chunk sealed in one reused buffer.
func writeSnapshotChunks(w tableWriter, pos uint64, data []byte) error {
	n := snapshotChunks(len(data))
	if n > maxSnapshotChunks {
		return fmt.Errorf("%w: snapshot of %d bytes", ErrInvalid, len(data))
	}
	if err := w.Set(snapshotChunkKey(pos, 0),
		snapshotHeaderValue(len(data), n, crc32.Checksum(data, castagnoli))); err != nil {
		return err
	}
	buf := make([]byte, 5+min(len(data), snapshotChunk))
	for i := range n {
		p := data[i*snapshotChunk : min((i+1)*snapshotChunk, len(data))]
		v := buf[:5+len(p)]
		sealInto(v, p)
		if err := w.Set(snapshotChunkKey(pos, uint32(i+1)), v); err != nil {
			return err
		}
	}
	return nil
}

// snapshotHeaderValue is the sealed header of a snapshot of size bytes in n
// chunks whose bytes' checksum is sum.
func snapshotHeaderValue(size, n int, sum uint32) []byte {
	header := binary.BigEndian.AppendUint64(make([]byte, 0, snapshotHeaderLen), uint64(size))
	header = binary.BigEndian.AppendUint32(header, uint32(n))
	return seal(binary.BigEndian.AppendUint32(header, sum))
}

// chunker is an io.Writer that cuts what it is given into a snapshot's
// chunks as it comes (Log.SaveSnapshotFrom). Each chunk is a value of its
// own with room for its seal in front, so it is sealed where it is, and
// the header, which precedes the chunks in the table, is written once the
// last chunk is known.
type chunker struct {
	chunks [][]byte // each 5 bytes of seal, then up to snapshotChunk bytes
	size   int
}

func (c *chunker) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if len(c.chunks) == 0 || len(c.chunks[len(c.chunks)-1]) == 5+snapshotChunk {
			c.chunks = append(c.chunks, make([]byte, 5, 5+snapshotChunk))
		}
		last := &c.chunks[len(c.chunks)-1]
		k := min(len(p), 5+snapshotChunk-len(*last))
		*last = append(*last, p[:k]...)
		p = p[k:]
	}
	c.size += n
	return n, nil
}

// writeSnapshot writes what c was given as the snapshot at pos through w,
// as writeSnapshotChunks writes the same bytes.
func (c *chunker) writeSnapshot(w tableWriter, pos uint64) error {
	if len(c.chunks) > maxSnapshotChunks {
		return fmt.Errorf("%w: snapshot of %d bytes", ErrInvalid, c.size)
	}
	var sum uint32
	for _, v := range c.chunks {
		sum = crc32.Update(sum, castagnoli, v[5:])
	}
	if err := w.Set(snapshotChunkKey(pos, 0), snapshotHeaderValue(c.size, len(c.chunks), sum)); err != nil {
		return err
	}
	for i, v := range c.chunks {
		sealInPlace(v)
		if err := w.Set(snapshotChunkKey(pos, uint32(i+1)), v); err != nil {
			return err
		}
	}
	return nil
}

// readSnapshot returns a copy of the snapshot at pos, read through it (an
// iterator over the snapshot prefix), checking each chunk's seal, that
// every chunk the header names is there in order and nothing after it, the
// size and the checksum of the whole. It leaves it on the first key past
// the snapshot (or exhausted).
func readSnapshot(it *pebble.Iterator, pos uint64) ([]byte, error) {
	first := snapshotKey(pos)
	if !it.SeekGE(first) {
		return nil, orErr(it.Error(), corruptf(0, first, "snapshot at %d vanished", pos))
	}
	data, err := readSnapshotAt(it, pos)
	if err != nil {
		return nil, err
	}
	if it.Next() && len(it.Key()) >= 9 && binary.BigEndian.Uint64(it.Key()[1:9]) == pos {
		return nil, corruptf(0, it.Key(), "snapshot at %d has a key past its last chunk", pos)
	}
	if err := it.Error(); err != nil {
		return nil, orErr(err, nil)
	}
	return data, nil
}

// readSnapshotAt reads the snapshot at pos whose first key it is on,
// leaving it on the snapshot's last key.
func readSnapshotAt(it *pebble.Iterator, pos uint64) ([]byte, error) {
	k := it.Key()
	v, err := it.ValueAndErr()
	if err != nil {
		return nil, orErr(err, nil)
	}
	if len(k) == 9 { // 'n' | pos, written before chunks: the whole snapshot
		p, err := unseal(k, v)
		if err != nil {
			return nil, err
		}
		return append([]byte(nil), p...), nil
	}
	size, n, sum, err := snapshotHeader(k, v, pos)
	if err != nil {
		return nil, err
	}
	if size > uint64(n)*snapshotChunk || (n > 0 && size <= uint64(n-1)*snapshotChunk) {
		return nil, corruptf(0, k, "snapshot header of %d bytes in %d chunks", size, n)
	}
	// NB: the header is believed only as far as the chunks bear it out:
	// the buffer starts at most snapshotPrealloc and grows with the chunks
	// actually read, so a header that claims terabytes costs nothing.
	data := make([]byte, 0, min(size, snapshotPrealloc))
	for i := uint32(1); i <= n; i++ {
		want := snapshotChunkKey(pos, i)
		if !it.Next() || string(it.Key()) != string(want) {
			if err := it.Error(); err != nil {
				return nil, orErr(err, nil)
			}
			return nil, corruptf(0, want, "snapshot chunk %d of %d is missing", i, n)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, orErr(err, nil)
		}
		p, err := unseal(want, v)
		if err != nil {
			return nil, err
		}
		if wantLen := min(size-uint64(i-1)*snapshotChunk, snapshotChunk); uint64(len(p)) != wantLen {
			return nil, corruptf(0, want, "snapshot chunk of %d bytes, want %d", len(p), wantLen)
		}
		data = append(data, p...)
	}
	if got := crc32.Checksum(data, castagnoli); got != sum {
		return nil, corruptf(0, k, "snapshot checksum mismatch (stored %08x, computed %08x): its chunks are out of order",
			sum, got)
	}
	return data, nil
}

// snapshotPrealloc bounds the buffer a snapshot's read starts with.
const snapshotPrealloc = 64 << 20

// snapshotHeader decodes the header chunk of the snapshot at pos.
func snapshotHeader(k, v []byte, pos uint64) (size uint64, chunks, sum uint32, err error) {
	if len(k) != snapshotChunkKeyLen || binary.BigEndian.Uint64(k[1:9]) != pos || binary.BigEndian.Uint32(k[9:]) != 0 {
		return 0, 0, 0, corruptf(0, k, "snapshot at %d has no header", pos)
	}
	p, err := unseal(k, v)
	if err != nil {
		return 0, 0, 0, err
	}
	if len(p) != snapshotHeaderLen {
		return 0, 0, 0, corruptf(0, k, "snapshot header of %d bytes, want %d", len(p), snapshotHeaderLen)
	}
	return binary.BigEndian.Uint64(p), binary.BigEndian.Uint32(p[8:]), binary.BigEndian.Uint32(p[12:]), nil
}

// verifySnapshots checks the snapshot slot: every snapshot, whichever its
// layout, whole and sealed and not beyond the head. It returns how many
// snapshots it holds.
func verifySnapshots(snap *pebble.Snapshot, headPos uint64) (int, error) {
	return eachSnapshot(snap, headPos, func(uint64, []byte) {})
}

// eachSnapshot reads every snapshot r holds, in position order, refusing
// one beyond head or not whole (readSnapshot), calls fn with each, and
// returns how many it read.
func eachSnapshot(r iterable, head uint64, fn func(pos uint64, data []byte)) (int, error) {
	it, err := prefixIter(r, prefixSnapshot)
	if err != nil {
		return 0, orErr(err, nil)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Valid() {
		k := it.Key()
		if len(k) != 9 && len(k) != snapshotChunkKeyLen {
			return n, corruptf(0, k, "malformed snapshot key")
		}
		pos := binary.BigEndian.Uint64(k[1:9])
		if pos > head {
			return n, corruptf(0, k, "snapshot at %d is beyond the head %d", pos, head)
		}
		data, err := readSnapshot(it, pos)
		if err != nil {
			return n, err
		}
		fn(pos, data)
		n++
	}
	return n, orErr(it.Error(), nil)
}

// ChunkSnapshots is the step to FormatChunkedSnapshots: a snapshot stored
// whole, as stores before that format hold it, is rewritten in chunks. A
// whole snapshot that fails its seal is dropped: it is derived data, never
// trusted, and the next start rebuilds what it held from the log. The step
// is idempotent: a snapshot's chunks and the deletion of its whole key
// commit in one batch, so a step that stopped part-way leaves each snapshot
// whole, to be rewritten again, or in chunks. NB: not in separate batches:
// keys of a snapshot's position past its whole key are damage to readers,
// and verify called a store that only needed the step run again corrupt.
func (u *Upgrade) ChunkSnapshots() (rewritten int, err error) {
	_, err = eachKey(u.l.db, prefixSnapshot, func(k, v []byte) error {
		if len(k) != 9 {
			return nil // a chunk
		}
		if p, err := unseal(k, v); err == nil {
			if err := writeSnapshotChunks(upgradeWriter{u}, binary.BigEndian.Uint64(k[1:]), p); err != nil {
				return err
			}
			rewritten++
		}
		return u.del(k) // the batch copies k
	})
	if err != nil {
		return rewritten, fmt.Errorf("eventlog: chunk snapshots: %w", err)
	}
	return rewritten, nil
}

// upgradeWriter holds a snapshot's chunks in a format step's batch until the deletion of its whole key.
type upgradeWriter struct{ u *Upgrade }

func (w upgradeWriter) Set(key, value []byte) error {
	w.u.hold(key, value)
	return nil
}
