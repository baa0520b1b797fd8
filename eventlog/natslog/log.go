package natslog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/crewlog/crewlog/eventlog"
)

// Errors of the JetStream log.
var (
	// ErrFenced is returned by Commit when the stream holds a group this
	// log has not copied: another writer appended since. The group was not
	// committed; this writer is deposed and must fail stop.
	ErrFenced = errors.New("natslog: fenced: the stream moved past this writer (another writer appended)")
	// ErrDiverged is returned when a group in the stream does not follow the
	// local copy: the copy is not a copy of this stream.
	ErrDiverged = errors.New("natslog: the local log is not a copy of the stream")
)

// Log is a crewlog log whose commit point is a JetStream stream and whose
// materialised copy is a local eventlog.Log (doc.go).
//
// Concurrency: Commit, CatchUp and Follow serialise on one mutex; a node
// calls Commit only as the writer and Follow only as a follower. Errors:
// any error of Commit leaves the group in doubt or refused (ErrFenced), and
// the engine above fails stop.
type Log struct {
	local  *eventlog.Log
	js     jetstream.JetStream
	stream jetstream.Stream
	cfg    Config

	mu   sync.Mutex
	last uint64 // the stream sequence the local copy holds: the fencing token
}

// Open ensures the stream exists and binds it to local, a copy of it (or
// an empty log). It copies nothing yet: see CatchUp and Follow.
func Open(ctx context.Context, js jetstream.JetStream, local *eventlog.Log, cfg Config) (*Log, error) {
	st, err := EnsureStream(ctx, js, cfg)
	if err != nil {
		return nil, err
	}
	last, err := local.Source()
	if err != nil {
		return nil, err
	}
	if head, _ := local.Head(); head > 0 && last == 0 {
		return nil, fmt.Errorf("%w: it holds %d events and no stream sequence (copy a Pebble store in with migrate-store)", ErrDiverged, head)
	}
	return &Log{local: local, js: js, stream: st, cfg: cfg, last: last}, nil
}

// Local is the materialised copy.
func (l *Log) Local() *eventlog.Log { return l.local }

// Sequence is the stream sequence the local copy holds.
func (l *Log) Sequence() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// Commit publishes ws as one message with the expected last sequence of the
// whole stream set to the sequence the local copy holds, and once JetStream
// acknowledged it (stored on a majority of replicas, each fsynced), appends
// it to the local copy. It implements commands.Committer.
//
// NB: the expected last sequence is the fence. Two writers that both think
// they lead publish against the same sequence; JetStream stores at most one
// of them, and the other gets ErrFenced, never a silent fork.
func (l *Log) Commit(ws []eventlog.Write) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.local.Check(ws...); err != nil {
		return 0, err
	}
	after, _ := l.local.Head()
	data, err := encodeGroup(after, ws)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.publishTimeout())
	defer cancel()
	ack, err := l.js.PublishMsg(ctx, &nats.Msg{Subject: l.cfg.Subject(), Data: data},
		jetstream.WithExpectStream(l.cfg.Stream), jetstream.WithExpectLastSequence(l.last))
	if isWrongLastSequence(err) {
		return 0, fmt.Errorf("%w (expected sequence %d)", ErrFenced, l.last)
	}
	if err != nil {
		return 0, fmt.Errorf("natslog: publish group: %w", err)
	}
	if ack.Sequence != l.last+1 {
		return 0, fmt.Errorf("%w: the group was stored at sequence %d after %d", ErrDiverged, ack.Sequence, l.last)
	}
	first, err := l.local.AppendFrom(ack.Sequence, ws...)
	if err != nil {
		return 0, err
	}
	l.last = ack.Sequence
	return first, nil
}

func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// CatchUp copies every group the stream holds beyond the local copy, up to
// the stream's last sequence when called, and returns how many it copied.
// A follower becoming the writer calls it before deciding anything.
func (l *Log) CatchUp(ctx context.Context) (int, error) {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("natslog: stream info: %w", err)
	}
	target := info.State.LastSeq
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last >= target {
		return 0, nil
	}
	cons, err := l.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: l.last + 1, MaxResetAttempts: 2})
	if err != nil {
		return 0, fmt.Errorf("natslog: consumer: %w", err)
	}
	n := 0
	for l.last < target {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		// Exactly what remains (at most 256): the fetch returns as soon as
		// it has them, instead of waiting out its expiry for more.
		batch, err := cons.Fetch(int(min(256, target-l.last)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return n, fmt.Errorf("natslog: fetch: %w", err)
		}
		for m := range batch.Messages() {
			if err := l.copyLocked(m); err != nil {
				return n, err
			}
			n++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return n, fmt.Errorf("natslog: fetch: %w", err)
		}
	}
	return n, nil
}

// Follow copies groups as the stream receives them until ctx ends or an
// error, calling copied (on Follow's goroutine) whenever it has copied a
// group and none is pending, or every 256 groups: a follower's engine
// catches up then. It returns ctx.Err() when ctx ends.
func (l *Log) Follow(ctx context.Context, copied func()) error {
	l.mu.Lock()
	start := l.last + 1
	l.mu.Unlock()
	// NB: a bounded number of resets: the default retries forever, and a
	// copier whose server lost its quorum (a partition) would then wait
	// for it instead of failing, so its crewd never reconnected elsewhere.
	cons, err := l.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start, MaxResetAttempts: 2})
	if err != nil {
		return fmt.Errorf("natslog: consumer: %w", err)
	}
	// Short pulls with frequent heartbeats: when the server serving the
	// consumer goes away, a missed heartbeat makes the ordered consumer
	// start again where it was within about a second, not half a minute.
	it, err := cons.Messages(jetstream.PullExpiry(2*time.Second), jetstream.PullHeartbeat(500*time.Millisecond))
	if err != nil {
		return fmt.Errorf("natslog: consume: %w", err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	since := 0
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("natslog: follow: %w", err)
		}
		l.mu.Lock()
		err = l.copyLocked(m)
		l.mu.Unlock()
		if err != nil {
			return err
		}
		since++
		if md, _ := m.Metadata(); since >= 256 || md == nil || md.NumPending == 0 {
			copied()
			since = 0
		}
	}
}

// copyLocked appends one message to the local copy: the next sequence,
// following the local head, or an error.
func (l *Log) copyLocked(m jetstream.Msg) error {
	md, err := m.Metadata()
	if err != nil {
		return fmt.Errorf("natslog: message metadata: %w", err)
	}
	seq := md.Sequence.Stream
	if seq <= l.last {
		return nil // already copied (a consumer redelivery)
	}
	if seq != l.last+1 {
		return fmt.Errorf("%w: sequence %d follows %d", ErrDiverged, seq, l.last)
	}
	after, ws, err := decodeGroup(m.Data())
	if err != nil {
		return fmt.Errorf("natslog: sequence %d: %w", seq, err)
	}
	if head, _ := l.local.Head(); head != after {
		return fmt.Errorf("%w: sequence %d follows position %d, the copy is at %d", ErrDiverged, seq, after, head)
	}
	if _, err := l.local.AppendFrom(seq, ws...); err != nil {
		return fmt.Errorf("natslog: copy sequence %d: %w", seq, err)
	}
	l.last = seq
	return nil
}
