package bench

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// rawFile is the physical limit: records written at the end of one file,
// one write and one fdatasync per group. Nothing is indexed; a reader scans.
//
// The file is preallocated and zero-filled before the workload (and again
// ahead of the end, a chunk at a time, when the workload outgrows it), so a
// group's fdatasync flushes its data and nothing else: no size change, no
// block allocation, no unwritten extent to convert — the metadata a plain
// append makes every sync write too.
type rawFile struct {
	f         *os.File
	path      string
	end       int64 // where the next group goes
	allocated int64 // zero-filled bytes
	// noSync skips the fdatasync: only the pre-check's own test sets it,
	// to prove the check refuses a store that does not sync.
	noSync bool
}

// rawChunk is how much is zero-filled at a time.
const rawChunk = 256 << 20

func openRawFile(dir string) (*rawFile, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("bench: raw file: %w", err)
	}
	p := filepath.Join(dir, "events.log")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("bench: raw file: %w", err)
	}
	r := &rawFile{f: f, path: p}
	if err := r.grow(0); err != nil {
		return nil, err
	}
	return r, nil
}

// grow zero-fills another chunk from the allocated end and makes it durable
// (file and directory), so later writes inside it change no metadata.
func (r *rawFile) grow(need int64) error {
	zero := make([]byte, 1<<20)
	for r.allocated < need+rawChunk {
		for i := int64(0); i < rawChunk; i += int64(len(zero)) {
			if _, err := r.f.WriteAt(zero, r.allocated+i); err != nil {
				return fmt.Errorf("bench: raw file preallocate: %w", err)
			}
		}
		r.allocated += rawChunk
	}
	if err := r.f.Sync(); err != nil {
		return fmt.Errorf("bench: raw file preallocate: %w", err)
	}
	return syncDir(filepath.Dir(r.path))
}

func (r *rawFile) Write(_ []sinkRecord, buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	if r.end+int64(len(buf)) > r.allocated {
		if err := r.grow(r.end + int64(len(buf))); err != nil {
			return err
		}
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

func (r *rawFile) Close() error { return r.f.Close() }
