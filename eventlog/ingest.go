package eventlog

import (
	"context"
	"errors"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
)

// ingestFile is where a table is built before Pebble takes it in. It lives
// in the store's directory (ingestion links the file, so it must be on the
// store's file system) under a name Pebble does not parse, so Pebble
// ignores it; Open removes one a crash left behind.
const ingestFile = "crewlog-ingest.tmp"

// tableWriter is what ingestReplacing's caller writes its keys through:
// in increasing key order, each inside the span; the writer copies key and
// value, so the caller may reuse both.
type tableWriter interface {
	Set(key, value []byte) error
}

// ingestReplacing replaces every key in span with the keys write sets,
// atomically and durably, without writing them through the WAL and the
// memtable: they are written to a table of their own, synced, and
// ingested with span excised, in one version edit of Pebble's manifest.
// Before that edit is durable a crash leaves span as it was (the file is
// an orphan Pebble never references); after it, the new keys.
//
// NB: an error building the table (a full disk) saves nothing and leaves the
// log as it was, but one writing the edit to Pebble's manifest is fatal in
// Pebble, which cannot know whether the edit was written: it calls the
// logger's Fatalf, which fails the log stop and panics (*FatalError) on the
// caller's goroutine with Pebble's locks held. Nothing may recover that
// panic and go on (RepanicFatal: the store answers nothing more); the
// process exits, and the next Open recovers every acknowledged append and
// span as it was or with the new keys.
func (l *Log) ingestReplacing(span pebble.KeyRange, write func(tableWriter) error) (err error) {
	l.ingestMu.Lock()
	defer l.ingestMu.Unlock()
	fs := l.opts.FS
	path := fs.PathJoin(l.dir, ingestFile)
	f, err := fs.Create(path, "")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = fs.Remove(path)
		}
	}()
	// NB: the table is built with the options of the store's bottom level
	// (its blocks compressed, unlike a flush's: compression.go) and the
	// table format the store writes.
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f),
		l.pebbleOpts.MakeWriterOptions(bottomLevel, l.db.TableFormat()))
	err = write(w)
	// The writer syncs the file before closing it (Ingest requires it).
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// Ingest removes the file once it is linked into the store.
	_, err = l.db.IngestAndExcise(context.Background(), []string{path}, nil, nil, span)
	return err
}

// removeStaleIngestFile removes a table a crash left before its ingestion.
func (l *Log) removeStaleIngestFile() error {
	err := l.opts.FS.Remove(l.opts.FS.PathJoin(l.dir, ingestFile))
	if err == nil || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
