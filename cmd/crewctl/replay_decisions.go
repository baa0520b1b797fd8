package main

import (
	"bufio"
	"bytes"
	"io"
	"os"

	"github.com/crewlog/crewlog/audit"
)

// decisionSpool keeps the decisions replay --explain re-runs, as they are to be printed, in a file of its own until
// their turn comes (after the state, in text; after the timeline, in --json), so a replay of millions of decisions
// holds none of them in memory. The file is removed as soon as it is made: nothing is left behind, however replay
// ends.
type decisionSpool struct {
	f *os.File
	// file keeps the first write to f that failed (output.go): the spool is then of no use.
	file *output
	w    *bufio.Writer
	json bool
	// n counts the decisions spooled.
	n int
	// err is the first decision that could not be encoded.
	err   error
	entry bytes.Buffer
}

// newDecisionSpool makes a spool in the temporary directory ($TMPDIR) of decisions printed as text, or as --json's
// elements.
func newDecisionSpool(asJSON bool) (*decisionSpool, error) {
	f, err := os.CreateTemp("", "crewctl-replay-decisions-")
	if err != nil {
		return nil, err
	}
	// NB: the open file stays readable and writable; its name goes now, so a replay killed leaves nothing.
	_ = os.Remove(f.Name())
	file := &output{w: f}
	return &decisionSpool{f: f, file: file, w: bufio.NewWriter(file), json: asJSON}, nil
}

// add spools d.
func (s *decisionSpool) add(d audit.Decision) {
	if s.failed() != nil {
		return
	}
	s.n++
	if !s.json {
		printDecision(screen{s.w}, d)
		return
	}
	if s.err = jsonElement(&s.entry, d, s.n == 1); s.err == nil {
		_, _ = s.w.Write(s.entry.Bytes()) // NB: a write that failed is kept by s.file
	}
}

// failed is the first error of keeping a decision, nil when every one is kept so far.
func (s *decisionSpool) failed() error {
	if s.err != nil {
		return s.err
	}
	return s.file.failed()
}

// copyTo writes the decisions spooled to w.
func (s *decisionSpool) copyTo(w io.Writer) error {
	if err := s.w.Flush(); err != nil {
		return err
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err := io.Copy(w, s.f)
	return err
}

func (s *decisionSpool) close() { _ = s.f.Close() }
