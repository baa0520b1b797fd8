package commands

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// copyingCommitter stands for a replicated log: it appends every group to
// the writer's log and copies it, sequence by sequence, to a follower's.
type copyingCommitter struct {
	own, copy *eventlog.Log
	seq       uint64
	fail      error
}

func (c *copyingCommitter) Commit(ws []eventlog.Write) (uint64, error) {
	if c.fail != nil {
		return 0, c.fail
	}
	c.seq++
	// The follower gets the writes as decided, before the writer's
	// append assigns positions in place.
	cp := make([]eventlog.Write, len(ws))
	for i, w := range ws {
		cp[i] = w
		cp[i].Events = append([]eventlog.Event(nil), w.Events...)
	}
	first, err := c.own.Append(ws...)
	if err != nil {
		return 0, err
	}
	if _, err := c.copy.AppendFrom(c.seq, cp...); err != nil {
		return 0, err
	}
	return first, nil
}

// writerAndCopy opens a writer's log and the log of a follower that copies it, closed when t ends.
func writerAndCopy(t *testing.T) (own, copyLog *eventlog.Log) {
	t.Helper()
	own, err := eventlog.Open("own", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	t.Cleanup(func() { own.Close() })
	copyLog, err = eventlog.Open("copy", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	t.Cleanup(func() { copyLog.Close() })
	return own, copyLog
}

func snapshotOf(t *testing.T, e *Engine) []byte {
	t.Helper()
	var b []byte
	var err error
	e.Read(func(s *projections.State) { b, err = projections.EncodeSnapshot(s) })
	require.NoError(t, err)
	return b
}

// A follower's engine that catches up on the groups another engine
// committed holds the same state, and its log the same records.
func TestEngineCatchUpFollowsAnotherWriter(t *testing.T) {
	clock := newTestClock()
	own, copyLog := writerAndCopy(t)

	c := &copyingCommitter{own: own, copy: copyLog}
	w, err := Open(own, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, Committer: c})
	require.NoError(t, err)
	defer w.Close()
	f, err := Open(copyLog, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1})
	require.NoError(t, err)
	defer f.Close()

	wf := &engineFixture{t: t, eng: w, clock: clock}
	changed := f.Changed()
	wf.seedRun("r1", 1000)
	wf.seedRun("r2", 0)
	require.NoError(t, f.CatchUp(context.Background()))
	<-changed // CatchUp published

	require.Equal(t, w.Head(), f.Head())
	require.Equal(t, snapshotOf(t, w), snapshotOf(t, f))
	ownHead, ownHash := own.Head()
	copyHead, copyHash := copyLog.Head()
	require.Equal(t, ownHead, copyHead)
	require.Equal(t, ownHash, copyHash, "the copy's hash chain is the writer's")
	src, err := copyLog.Source()
	require.NoError(t, err)
	require.Equal(t, c.seq, src)

	// Nothing new: CatchUp is a no-op.
	require.NoError(t, f.CatchUp(context.Background()))
	require.Equal(t, w.Head(), f.Head())
}

// A Committer error fails the engine stop, like a log error.
func TestEngineCommitterErrorFailsStop(t *testing.T) {
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer l.Close()
	fenced := errors.New("fenced: another writer appended")
	e, err := Open(l, Options{ExpiryInterval: -1, Committer: &copyingCommitter{fail: fenced}})
	require.NoError(t, err)
	defer e.Close()
	_, err = e.Submit(context.Background(), Request{Actor: orchestrator,
		Command: &RunCreate{RunID: "r", Team: "t", Goal: "g", Cwd: "/w"}})
	require.ErrorIs(t, err, ErrFailed)
	<-e.Failed()
	require.ErrorIs(t, e.CatchUp(context.Background()), ErrFailed)
	head, _ := l.Head()
	require.Zero(t, head)
}

type fixedForwarder struct{ got []Request }

func (f *fixedForwarder) Forward(_ context.Context, r Request) (Reply, bool, error) {
	f.got = append(f.got, r)
	return Reply{Result: []byte(`{"forwarded":true}`)}, true, nil
}

// A request a Forwarder handles never reaches this engine's log.
func TestEngineForwarderTakesRequests(t *testing.T) {
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer l.Close()
	fw := &fixedForwarder{}
	e, err := Open(l, Options{ExpiryInterval: -1, Forwarder: fw})
	require.NoError(t, err)
	defer e.Close()
	r, err := e.Submit(context.Background(), Request{Principal: events.AdminPrincipal(), CommandID: "c1",
		Actor: admin, Command: &RunCreate{RunID: "r", Team: "t", Goal: "g", Cwd: "/w"}})
	require.NoError(t, err)
	require.JSONEq(t, `{"forwarded":true}`, string(r.Result))
	require.Len(t, fw.got, 1)
	head, _ := l.Head()
	require.Zero(t, head)
}

// writingForwarder is the Forwarder of a cluster's writer (a commands.WriterForwarder reporting Writer): it forwards
// nothing.
type writingForwarder struct{}

func (writingForwarder) Forward(context.Context, Request) (Reply, bool, error) {
	return Reply{}, false, nil
}
func (writingForwarder) Writer() bool { return true }

// heldCommitter appends each group to its log once the test lets it (release), after telling it the group is there
// (committing): a group in flight for as long as the test needs.
type heldCommitter struct {
	l          *eventlog.Log
	committing chan struct{}
	release    chan struct{}
}

func (c *heldCommitter) Commit(ws []eventlog.Write) (uint64, error) {
	c.committing <- struct{}{}
	<-c.release
	return c.l.Append(ws...)
}

// A request its caller refused (Request.Refused) is decided by the engine of a cluster's writer as by one crewd's: a
// retry whose first attempt is still in flight is answered that attempt's outcome once it is durable. The writer
// answered it from its log alone, as a follower answers from its copy, and told the retry the refusal while the first
// attempt recorded its message.
func TestAWritersRefusedRetryOfAnAttemptInFlightIsAnsweredItsOutcome(t *testing.T) {
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer l.Close()
	c := &heldCommitter{l: l, committing: make(chan struct{}), release: make(chan struct{})}
	queued := make(chan struct{}, 2) // each attempt, once the writer's queue holds it
	e, err := Open(l, Options{ExpiryInterval: -1, Forwarder: writingForwarder{}, Committer: c,
		hooks: &testHooks{queued: func() { queued <- struct{}{} }}})
	require.NoError(t, err)
	defer e.Close()
	release := sync.OnceFunc(func() { close(c.release) })
	defer release() // NB: before Close, which waits for the group in flight

	req := Request{Principal: events.AdminPrincipal(), CommandID: "c1", Actor: admin,
		Command: &RunCreate{RunID: "r", Team: "t", Goal: "g", Cwd: "/w"}}
	type answer struct {
		rep Reply
		err error
	}
	submit := func(r Request) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			rep, err := e.Submit(context.Background(), r)
			ch <- answer{rep, err}
		}()
		return ch
	}
	first := submit(req)
	<-queued
	<-c.committing // the first attempt's group is in flight
	refusal := errors.New("refused by the caller")
	req.Refused = refusal
	retry := submit(req)
	var r answer
	answered := false
	select {
	case r = <-retry: // answered without the writer's queue
		answered = true
		require.NotErrorIs(t, r.err, refusal, "the retry was refused while its first attempt was being recorded")
	case <-queued: // queued behind the first attempt, as on one crewd
	}
	release()
	f := <-first
	if !answered {
		r = <-retry
	}
	require.NoError(t, f.err)
	require.NoError(t, r.err, "answered as the first attempt")
	require.Nil(t, r.rep.Rejected)
	require.Equal(t, string(f.rep.Result), string(r.rep.Result))
	require.Equal(t, f.rep.Position, r.rep.Position)
}
