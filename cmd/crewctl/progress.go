package main

import (
	"io"
	"os"
	"strings"
	"time"
)

// progress is a one-line bar on stderr for long work (replay, verify,
// backup). It shows only when the work has run for over a second and both
// stdout and stderr are terminals: a script or a pipe never gets control
// characters.
type progress struct {
	w       screen
	label   string
	enabled bool
	start   time.Time
	last    time.Time
	shown   bool
}

const (
	progressDelay = time.Second
	progressEvery = 100 * time.Millisecond
	progressWidth = 30
)

func newProgress(io stdio, label string) *progress {
	return &progress{w: screen{io.err}, label: label, enabled: isTerminal(io.out) && isTerminal(io.err),
		start: time.Now()}
}

// isTerminal reports whether w is a character device. NB: stdout is behind output (run), which is no file: the bar
// looks at the one it writes to.
func isTerminal(w io.Writer) bool {
	if o, ok := w.(*output); ok {
		w = o.w
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// update draws done of total; it is cheap to call often.
func (p *progress) update(done, total uint64) {
	if !p.enabled {
		return
	}
	now := time.Now()
	if now.Sub(p.start) < progressDelay || now.Sub(p.last) < progressEvery {
		return
	}
	p.last, p.shown = now, true
	frac := 0.0
	if total > 0 {
		frac = min(float64(done)/float64(total), 1)
	}
	n := int(frac * progressWidth)
	rate := float64(done) / now.Sub(p.start).Seconds()
	p.w.printf("\r%s [%s%s] %3.0f%% %d/%d %.0f/s ", p.label, strings.Repeat("=", n),
		strings.Repeat(" ", progressWidth-n), frac*100, done, total, rate)
}

// finish clears the bar if it was drawn.
func (p *progress) finish() {
	if p.shown {
		p.w.printf("\r\033[K")
		p.shown = false
	}
}
