package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/crewlog/crewlog/eventlog/natslog"
	"github.com/crewlog/crewlog/events"
)

// jetStreamStore is NATS JetStream embedded: nats-server in this process
// (no listener; the client connects in-process), file storage with
// sync_interval always (SyncAlways: every stored message is fsynced), one
// subject per run. An admission reads the run's last message (its state
// travels in every commit), decides, and publishes one message holding the
// decision's events with Nats-Expected-Last-Subject-Sequence set to the
// sequence it read; a wrong-last-sequence answer means another client got
// there first: re-read and retry.
//
// NB: one message per decision keeps the three events atomic without
// JetStream's atomic batch publish, which stages every batch in a store of
// its own; that choice can only flatter JetStream.
type jetStreamStore struct {
	srv       *server.Server
	nc        *nats.Conn
	js        jetstream.JetStream
	stream    jetstream.Stream
	conflicts atomic.Int64
	stored    atomic.Int64 // messages acknowledged
}

// jsCommit is one JetStream message: the events of one decision and the
// run's state after them.
type jsCommit struct {
	State  runState  `msgpack:"s"`
	Events []jsEvent `msgpack:"e"`
}

type jsEvent struct {
	Type    string `msgpack:"t"`
	Payload []byte `msgpack:"p"`
}

const jsStream = "CREW"

func openJetStreamStore(dir string) (*jetStreamStore, error) {
	return startJetStream(dir, 0, "run.>")
}

// startJetStream starts the embedded server (maxPayload 0: the default) and
// creates the stream on subjects.
func startJetStream(dir string, maxPayload int32, subjects string) (*jetStreamStore, error) {
	srv, err := natslog.StartServer(natslog.ServerOptions{Name: "crewbench", StoreDir: dir, MaxPayload: maxPayload})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	s := &jetStreamStore{srv: srv}
	if s.nc, err = nats.Connect("", nats.InProcessServer(srv)); err != nil {
		return nil, errors.Join(fmt.Errorf("bench: nats connect: %w", err), s.Close())
	}
	if s.js, err = jetstream.New(s.nc); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	s.stream, err = s.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: jsStream,
		Subjects: []string{subjects}, Storage: jetstream.FileStorage, Replicas: 1, AllowDirect: true})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("bench: jetstream stream: %w", err), s.Close())
	}
	return s, nil
}

func subjectOf(run string) string { return "run." + run }

func (s *jetStreamStore) Setup(ctx context.Context, runs []string, spec Spec) error {
	for _, r := range runs {
		st := runState{Granted: spec.Budget, Slots: spec.Slots}
		if err := s.publish(ctx, r, &st, []event{runCreated(spec.Budget)}, 0); err != nil {
			return err
		}
	}
	return nil
}

// publish appends evs to run's subject, expecting last to be its last
// sequence (0: the subject must be empty).
func (s *jetStreamStore) publish(ctx context.Context, run string, st *runState, evs []event, last uint64) error {
	c := jsCommit{Events: make([]jsEvent, len(evs))}
	for i, e := range evs {
		p, err := events.EncodePayload(e.Payload)
		if err != nil {
			return err
		}
		c.Events[i] = jsEvent{Type: e.Type, Payload: p}
	}
	st.Version += uint64(len(evs))
	c.State = *st
	data, err := msgpack.Marshal(&c)
	if err != nil {
		return err
	}
	_, err = s.js.PublishMsg(ctx, &nats.Msg{Subject: subjectOf(run), Data: data},
		jetstream.WithExpectLastSequencePerSubject(last))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		s.conflicts.Add(1)
		return errConflict
	}
	if err != nil {
		return fmt.Errorf("bench: jetstream publish: %w", err)
	}
	s.stored.Add(1)
	return nil
}

// Commits counts the messages stored (one sync each with sync always).
func (s *jetStreamStore) Commits() int64 { return s.stored.Load() }

// update is the read-check-append loop of one decision.
func (s *jetStreamStore) update(ctx context.Context, run string, decide func(*runState) ([]event, error)) error {
	for {
		m, err := s.stream.GetLastMsgForSubject(ctx, subjectOf(run))
		if err != nil {
			return fmt.Errorf("bench: jetstream read %s: %w", run, err)
		}
		var c jsCommit
		if err := msgpack.Unmarshal(m.Data, &c); err != nil {
			return fmt.Errorf("bench: jetstream state: %w", err)
		}
		st := c.State.clone()
		evs, err := decide(st)
		if err != nil {
			return err
		}
		if err := s.publish(ctx, run, st, evs, m.Sequence); !errors.Is(err, errConflict) {
			return err
		}
	}
}

func (s *jetStreamStore) Admit(ctx context.Context, run string, tokens int64) (Admission, error) {
	var a Admission
	err := s.update(ctx, run, func(st *runState) ([]event, error) {
		a = Admission{}
		sub := newSubID()
		a.Reason = st.decide(tokens)
		evs := decisionEvents(st, sub, a.Reason, tokens, time.Now().UnixMilli())
		if a.Reason == "" {
			st.admit(sub, tokens)
			a.SubID = sub
		}
		return evs, nil
	})
	return a, err
}

func (s *jetStreamStore) Settle(ctx context.Context, run, subID, outcome string) error {
	return s.update(ctx, run, func(st *runState) ([]event, error) {
		if err := st.settle(subID); err != nil {
			return nil, err
		}
		return settleEvents(subID, outcome)
	})
}

// Retries counts optimistic-concurrency conflicts.
func (s *jetStreamStore) Retries() int64 { return s.conflicts.Load() }

func (s *jetStreamStore) Final(ctx context.Context) (map[string]Final, error) {
	f := newFinals()
	err := s.eachMessage(ctx, func(m *jetstream.RawStreamMsg) error {
		var c jsCommit
		if err := msgpack.Unmarshal(m.Data, &c); err != nil {
			return fmt.Errorf("bench: jetstream read %d: %w", m.Sequence, err)
		}
		run := m.Subject[len("run."):]
		for _, e := range c.Events {
			if err := f.addRecord(decodedRecord{Stream: run, Type: e.Type, Payload: e.Payload}); err != nil {
				return err
			}
		}
		return nil
	})
	return f.result(), err
}

// eachMessage calls fn for every message of the stream, in order.
func (s *jetStreamStore) eachMessage(ctx context.Context, fn func(*jetstream.RawStreamMsg) error) error {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("bench: jetstream info: %w", err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.stream.GetMsg(ctx, seq)
		if err != nil {
			return fmt.Errorf("bench: jetstream read %d: %w", seq, err)
		}
		if err := fn(m); err != nil {
			return err
		}
	}
	return nil
}

func (s *jetStreamStore) Close() error {
	if s.nc != nil {
		s.nc.Close()
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	return nil
}

// jetStreamSink is JetStream as a competent user would put it behind the
// group committer: the single writer publishes one message per group — the
// group's records back to back, in the file sink's record format — on one
// subject, and waits for its acknowledgement, which with sync_interval
// always comes after the message is fsynced. With one writer there is
// nothing to conflict with, so no expected-sequence header; the run's state
// lives in the committer's memory, as for the other sinks.
type jetStreamSink struct {
	*jetStreamStore
}

// jsMaxGroupBytes bounds one message: a group of maxGroup requests.
const jsMaxGroupBytes = 16 << 20

func openJetStreamSink(dir string) (*jetStreamSink, error) {
	s, err := startJetStream(dir, jsMaxGroupBytes, "log")
	if err != nil {
		return nil, err
	}
	return &jetStreamSink{s}, nil
}

func (s *jetStreamSink) Write(_ []sinkRecord, buf []byte) error {
	if _, err := s.js.Publish(context.Background(), "log", buf); err != nil {
		return fmt.Errorf("bench: jetstream publish: %w", err)
	}
	s.stored.Add(1)
	return nil
}

func (s *jetStreamSink) ReadAll(fn func(decodedRecord) error) error {
	return s.eachMessage(context.Background(), func(m *jetstream.RawStreamMsg) error {
		return eachRecord(m.Data, fn)
	})
}

// jetStreamAsyncSink is the other way a competent user would write to
// JetStream: the single writer publishes one message per decision (its
// events, so they stay atomic), asynchronously, on the run's subject, with
// every publish of a group in flight at once, and answers when all of them
// are acknowledged.
type jetStreamAsyncSink struct {
	*jetStreamStore
}

func openJetStreamAsyncSink(dir string) (*jetStreamAsyncSink, error) {
	s, err := startJetStream(dir, 0, "run.>")
	if err != nil {
		return nil, err
	}
	return &jetStreamAsyncSink{s}, nil
}

func (s *jetStreamAsyncSink) Write(recs []sinkRecord, _ []byte) error {
	var acks []jetstream.PubAckFuture
	for i := 0; i < len(recs); {
		j := i + 1
		for j < len(recs) && !recs[j].First {
			j++
		}
		// The decision's records are contiguous in the group's buffer.
		n := 0
		for _, r := range recs[i:j] {
			n += len(r.Bytes)
		}
		a, err := s.js.PublishAsync(subjectOf(recs[i].Stream), recs[i].Bytes[:n:n])
		if err != nil {
			return fmt.Errorf("bench: jetstream publish: %w", err)
		}
		acks = append(acks, a)
		i = j
	}
	for _, a := range acks {
		select {
		case <-a.Ok():
		case err := <-a.Err():
			return fmt.Errorf("bench: jetstream publish: %w", err)
		}
	}
	return nil
}

func (s *jetStreamAsyncSink) ReadAll(fn func(decodedRecord) error) error {
	return s.eachMessage(context.Background(), func(m *jetstream.RawStreamMsg) error {
		return eachRecord(m.Data, fn)
	})
}
