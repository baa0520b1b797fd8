package disktest

import (
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// stallLine is in the line the event log logs once Pebble holds its writes back (a write stall).
const stallLine = "holds writes back"

// StallWatch is the writer under a store's log handler (slog.NewTextHandler) that tells when the store logs a write
// stall: Wait returns once it has, the writer of the store held inside Pebble until the stall ends (on a
// SlowThenFull disk, until the disk is freed). Every line is passed on to the next writer, when there is one.
//
// Concurrency: Write is safe from any goroutine; the next writer must be too.
type StallWatch struct {
	next    io.Writer
	stalled chan struct{}
	once    sync.Once
}

// NewStallWatch returns a watch that passes every line on to next, or drops it when next is nil.
func NewStallWatch(next io.Writer) *StallWatch {
	return &StallWatch{next: next, stalled: make(chan struct{})}
}

// Write watches p, one record of the handler, and passes it on.
func (w *StallWatch) Write(p []byte) (int, error) {
	if strings.Contains(string(p), stallLine) {
		w.once.Do(func() { close(w.stalled) })
	}
	if w.next == nil {
		return len(p), nil
	}
	return w.next.Write(p)
}

// Wait returns once the store logged a write stall, and fails t when writes (the store's writer, nil for none
// watched) ends first, which it does when its writes are not held back, or when no stall comes within 30 seconds.
// Call it from the test's goroutine.
func (w *StallWatch) Wait(t testing.TB, writes <-chan error) {
	t.Helper()
	select {
	case <-w.stalled:
	case err := <-writes:
		t.Fatalf("the writes were not held back: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Pebble did not hold the writes back")
	}
}
