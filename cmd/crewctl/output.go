package main

import (
	"io"
	"sync"
)

// output is stdout as the commands write to it: it keeps the first write that failed. The lines a command writes
// for a person go through a screen, whose callers go on after a failed write (a terminal gone is no reason to stop a
// command that did its work); run then fails a command that would have exited 0 with its output lost, as a report
// redirected to a file on a full disk is: a script must not take a cut report, or a token never shown, for a success.
//
// Concurrency: Write is safe from any goroutine (follow's progress lines come from its own).
type output struct {
	w io.Writer

	mu  sync.Mutex
	err error
}

func (o *output) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if err != nil {
		o.mu.Lock()
		if o.err == nil {
			o.err = err
		}
		o.mu.Unlock()
	}
	return n, err
}

// failed is the first write error, nil when every write went through.
func (o *output) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}
