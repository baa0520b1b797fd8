package bench

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// rawFile is the physical limit: records appended to one O_APPEND file, one
// write and one fdatasync per group. Nothing is indexed; a reader scans.
type rawFile struct {
	f    *os.File
	path string
}

func openRawFile(dir string) (*rawFile, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("bench: raw file: %w", err)
	}
	p := filepath.Join(dir, "events.log")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("bench: raw file: %w", err)
	}
	return &rawFile{f: f, path: p}, nil
}

func (r *rawFile) Write(_ []sinkRecord, buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	if _, err := r.f.Write(buf); err != nil {
		return fmt.Errorf("bench: raw file write: %w", err)
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
	for len(b) > 0 {
		rec, rest, err := nextRecord(b)
		if err != nil {
			return err
		}
		if err := fn(rec); err != nil {
			return err
		}
		b = rest
	}
	return nil
}

func (r *rawFile) Close() error { return r.f.Close() }
