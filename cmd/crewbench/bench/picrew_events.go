package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// piAppender is pi-crew's in-process append queue of one events.jsonl
// (appendEventAsync's asyncQueues): events are appended one at a time, in
// the order they were recorded, off the caller's path. The queue is bounded
// so a caller cannot run ahead of its appends for long: the cost of the
// appends stays inside the measured rate.
type piAppender struct {
	path string
	q    chan piAppend
	done chan struct{}
	err  error // the first failed append; read after done
}

// piAppend is one queued event, or a flush marker (flushed set).
type piAppend struct {
	run     string
	e       event
	flushed chan struct{}
}

const piAppendQueue = 256

// record queues e for run's events.jsonl (fire-and-forget, as
// recordDelegateEvent).
func (s *piCrewStore) record(run string, e event) {
	s.appender(run).q <- piAppend{run: run, e: e}
}

func (s *piCrewStore) appender(run string) *piAppender {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.appenders[run]
	if !ok {
		a = &piAppender{path: filepath.Join(s.runDir(run), "events.jsonl"), q: make(chan piAppend, piAppendQueue),
			done: make(chan struct{})}
		s.appenders[run] = a
		go a.loop()
	}
	return a
}

// flush waits until every event recorded so far is appended and returns
// the first append error.
func (s *piCrewStore) flush() error {
	s.mu.Lock()
	as := make([]*piAppender, 0, len(s.appenders))
	for _, a := range s.appenders {
		as = append(as, a)
	}
	s.mu.Unlock()
	var errs []error
	for _, a := range as {
		f := make(chan struct{})
		a.q <- piAppend{flushed: f}
		<-f
		errs = append(errs, a.failure())
	}
	return errors.Join(errs...)
}

func (a *piAppender) failure() error {
	select {
	case <-a.done:
		return a.err
	default:
		return nil
	}
}

// loop appends queued events until one fails; after a failure it only
// answers flushes.
func (a *piAppender) loop() {
	failed := false
	for x := range a.q {
		if x.flushed != nil {
			close(x.flushed)
			continue
		}
		if failed {
			continue
		}
		if err := a.append(x.run, x.e); err != nil {
			a.err, failed = err, true
			close(a.done)
		}
	}
}

// append writes one event: its seq reserved under the seq lock (advance on
// reserve, the .seq sidecar written without fsync), one write of its JSON
// line without fsync, under the async family lock.
func (a *piAppender) append(run string, e event) (err error) {
	ctx := context.Background()
	unlock, err := mkdirLock(ctx, a.path+".alock", true)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, unlock()) }()
	unseq, err := mkdirLock(ctx, a.path+".seqlock", false)
	if err != nil {
		return err
	}
	seq := int64(0)
	if b, err := os.ReadFile(a.path + ".seq"); err == nil {
		seq, _ = strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	}
	seq++
	werr := os.WriteFile(a.path+".seq", []byte(strconv.FormatInt(seq, 10)), 0o600)
	if err := errors.Join(werr, unseq()); err != nil {
		return fmt.Errorf("bench: pi-crew seq: %w", err)
	}
	data, err := json.Marshal(e.Payload)
	if err != nil {
		return err
	}
	// pi-crew cuts the data's JSON to 200 and puts the type before it (recordDelegateEvent).
	msg := string(data)
	if len(msg) > 200 {
		msg = msg[:200]
	}
	msg = e.Type + ": " + msg
	line, err := json.Marshal(piEvent{Time: nowISO(), Type: e.Type, RunID: run, TaskID: parentTask,
		Message: msg, Data: data, Metadata: piEventMeta{Seq: seq, Provenance: "team_runner"}})
	if err != nil {
		return err
	}
	return appendLine(a.path, append(line, '\n'))
}
