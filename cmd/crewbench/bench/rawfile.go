package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// rawFile is the physical limit: records written at the end of one file,
// one write and one fdatasync per group. Nothing is indexed; a reader scans.
//
// The file is preallocated and zero-filled before the workload, and the next
// chunk in the background once half of the last is used, so a group's
// fdatasync flushes its data and nothing else: no size change, no block
// allocation, no unwritten extent to convert — the metadata a plain append
// makes every sync write too.
//
// Concurrency: Write from one goroutine (the group committer); the fill ahead
// runs in a goroutine of its own.
type rawFile struct {
	f     *os.File
	path  string
	end   int64 // where the next group goes
	chunk int64 // how much is zero-filled at a time
	// noSync skips the fdatasync: only the pre-check's own test sets it,
	// to prove the check refuses a store that does not sync.
	noSync bool
	// beforeFill, when set, runs as a fill ahead starts, off the lock: only
	// a test sets it, to hold the fill while groups are written.
	beforeFill func()

	mu        sync.Mutex
	allocated int64         // zero-filled and durable bytes
	filling   chan struct{} // closed when the fill ahead ends; nil when none runs
	fillErr   error         // a fill that failed: every later write fails
}

// rawChunk is how much is zero-filled at a time.
const rawChunk = 256 << 20

func openRawFile(dir string) (*rawFile, error) { return openRawFileChunk(dir, rawChunk) }

func openRawFileChunk(dir string, chunk int64) (*rawFile, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("bench: raw file: %w", err)
	}
	p := filepath.Join(dir, "events.log")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("bench: raw file: %w", err)
	}
	r := &rawFile{f: f, path: p, chunk: chunk}
	if err := r.zeroFill(0); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	r.allocated = chunk
	return r, nil
}

// zeroFill zero-fills the chunk at from and makes it durable (file and
// directory), so later writes inside it change no metadata.
//
// NB: each MiB is written back before the next is written
// (sync_file_range): fdatasync writes back every dirty page of the file, so
// a group's sync during a fill ahead would otherwise carry the zeros written
// so far (a 4 KiB write's sync took 25 ms after 64 MiB of them, against
// 0.1 ms), and the stall the fill ahead removes would move into the groups'
// syncs. So a group's sync carries at most one MiB of zeros.
func (r *rawFile) zeroFill(from int64) error {
	zero := make([]byte, 1<<20)
	for i := int64(0); i < r.chunk; i += int64(len(zero)) {
		n := min(int64(len(zero)), r.chunk-i)
		if _, err := r.f.WriteAt(zero[:n], from+i); err != nil {
			return fmt.Errorf("bench: raw file preallocate: %w", err)
		}
		const flags = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
		if err := unix.SyncFileRange(int(r.f.Fd()), from+i, n, flags); err != nil {
			return fmt.Errorf("bench: raw file preallocate: %w", err)
		}
	}
	if err := r.f.Sync(); err != nil {
		return fmt.Errorf("bench: raw file preallocate: %w", err)
	}
	return syncDir(filepath.Dir(r.path))
}

// room returns once the file is zero-filled up to need, and starts the fill
// of the next chunk when less than half of one would be left.
func (r *rawFile) room(need int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if r.fillErr != nil {
			return r.fillErr
		}
		if r.filling == nil && need > r.allocated-r.chunk/2 {
			r.fillAhead()
		}
		if need <= r.allocated {
			return nil
		}
		// NB: only a group larger than half a chunk, or a disk that writes
		// zeros slower than the workload writes its groups, catches up with
		// the fill.
		filling := r.filling
		r.mu.Unlock()
		<-filling
		r.mu.Lock()
	}
}

// fillAhead zero-fills the chunk after the allocated end in the background;
// r.mu is held.
func (r *rawFile) fillAhead() {
	from, done := r.allocated, make(chan struct{})
	r.filling = done
	go func() {
		if r.beforeFill != nil {
			r.beforeFill()
		}
		err := r.zeroFill(from)
		r.mu.Lock()
		if err != nil {
			r.fillErr = err
		} else {
			r.allocated = from + r.chunk
		}
		r.filling = nil
		r.mu.Unlock()
		close(done)
	}()
}

// zeroFilled is how many bytes are zero-filled and durable.
func (r *rawFile) zeroFilled() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.allocated
}

func (r *rawFile) Write(_ []sinkRecord, buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	if err := r.room(r.end + int64(len(buf))); err != nil {
		return err
	}
	if _, err := r.f.WriteAt(buf, r.end); err != nil {
		return fmt.Errorf("bench: raw file write: %w", err)
	}
	r.end += int64(len(buf))
	if r.noSync {
		return nil
	}
	if err := unix.Fdatasync(int(r.f.Fd())); err != nil {
		return fmt.Errorf("bench: raw file fdatasync: %w", err)
	}
	return nil
}

func (r *rawFile) ReadAll(fn func(decodedRecord) error) error {
	b, err := os.ReadFile(r.path)
	if err != nil {
		return fmt.Errorf("bench: raw file read: %w", err)
	}
	return eachRecord(b, fn)
}

// Close waits for the fill ahead, which writes to the file, then closes it.
func (r *rawFile) Close() error {
	r.mu.Lock()
	filling := r.filling
	r.mu.Unlock()
	if filling != nil {
		<-filling
	}
	return r.f.Close()
}
