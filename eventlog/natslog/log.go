package natslog

import (
	"context"
	"crypto/rand"
	"encoding/base64"
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
// Concurrency: Commit, Stage, Wait, CatchUp and Follow serialise on one
// mutex (Wait not while it awaits an acknowledgement); a node calls Commit
// and Stage only as the writer, Waits in Stage order, and Follow only as a
// follower. Errors: any error of Commit or Wait leaves the group in doubt
// or refused (ErrFenced), fails every group staged after it, and the
// engine above fails stop.
type Log struct {
	local  *eventlog.Log
	js     jetstream.JetStream
	stream jetstream.Stream
	cfg    Config

	mu   sync.Mutex
	last uint64 // the stream sequence the local copy holds: the fencing token
	// The copier's place: next is the sequence it reads next, pending the
	// group whose messages it has read in part (last < next-1 then).
	next    uint64
	pending *assembly

	// lastBatch is the id of the batch the local copy ends with (empty
	// after none, or one of the first layout): the batch the next one
	// follows (batch.go, Crewlog-Prev-Batch).
	lastBatch string

	writable bool   // the stream has this layout (checkStream)
	batchID  string // this Log's random prefix of its batch ids
	batches  uint64 // batches published, for the next id

	// The writer's pipeline (stage.go): where the stream will end once
	// the batches in flight are stored, how many are, the failure that
	// fails them, whether one had to be published again, and the signal
	// that none is in flight.
	staged   stagedEnd
	inflight int
	failure  error
	retrying bool
	drained  sync.Cond

	// loseMessages, set by tests, chooses messages of an attempt's batch
	// that never reach the server.
	loseMessages func(attempt int, msgs []*nats.Msg) []*nats.Msg
	// loseAck, set by tests, chooses batches (by their fence) whose
	// acknowledgement never reaches the writer.
	loseAck func(fence uint64) bool
}

// Open ensures the stream exists and binds it to local, a copy of it (or
// an empty log). It copies nothing yet: see CatchUp and Follow.
func Open(ctx context.Context, js jetstream.JetStream, local *eventlog.Log, cfg Config) (*Log, error) {
	st, layout, err := ensureStream(ctx, js, cfg)
	if err != nil {
		return nil, err
	}
	last, err := local.Source()
	if err != nil {
		return nil, err
	}
	if head, _ := local.Head(); head > 0 && last == 0 {
		// NB: a Pebble store's, or the source of a migrate-store to the stream, which is no copy of it either.
		return nil, fmt.Errorf("%w: it holds %d events and no stream sequence: a Pebble store, no copy of the stream "+
			"(start on an empty data directory; crewctl migrate-store --to jetstream copies a Pebble store into the "+
			"stream)", ErrDiverged, head)
	}
	lastBatch, err := batchAt(ctx, st, cfg, last)
	if err != nil {
		return nil, err
	}
	var id [12]byte
	_, _ = rand.Read(id[:]) // never fails (crypto/rand)
	l := &Log{local: local, js: js, stream: st, cfg: cfg, last: last, next: last + 1, lastBatch: lastBatch,
		writable: layout == layoutBatch, batchID: base64.RawURLEncoding.EncodeToString(id[:])}
	l.drained.L = &l.mu
	return l, nil
}

// batchAt is the id of the batch whose last message is at sequence seq:
// the batch a local copy that holds the stream up to seq ends with (empty
// at 0 and for a message of the first layout).
func batchAt(ctx context.Context, st jetstream.Stream, cfg Config, seq uint64) (string, error) {
	if seq == 0 {
		return "", nil
	}
	m, err := getMsg(ctx, st, seq)
	if err != nil {
		return "", fmt.Errorf("natslog: the copy's last message, sequence %d: %w", seq, err)
	}
	if len(m.Data) > 0 && m.Data[0] == groupVersion {
		return "", nil
	}
	if m.Subject == cfg.Subject() {
		var mf wireManifest
		if err := decodeWire(m.Data, &mf); err != nil {
			return "", fmt.Errorf("natslog: sequence %d: %w", seq, err)
		}
		return mf.Batch, nil
	}
	var k wireChunk
	if err := decodeWire(m.Data, &k); err != nil {
		return "", fmt.Errorf("natslog: sequence %d: %w", seq, err)
	}
	return k.Batch, nil
}

// Local is the materialised copy.
func (l *Log) Local() *eventlog.Log { return l.local }

// Sequence is the stream sequence the local copy holds.
func (l *Log) Sequence() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// Commit publishes ws as one JetStream atomic batch (batch.go; several,
// one after the other, for a group larger than a batch may be), the first
// message of each carrying the expected last sequence of the whole stream
// = the sequence the local copy holds, and once JetStream acknowledged a
// batch (stored whole on a majority of replicas, each fsynced), appends
// its writes to the local copy. It is Stage and then Wait (stage.go).
//
// NB: the expected last sequence is the fence. Two writers that both think
// they lead publish against the same sequence; JetStream stores at most one
// of the batches, and the other gets ErrFenced with none of its messages
// stored, never a silent fork.
func (l *Log) Commit(ws []eventlog.Write) (uint64, error) {
	s, err := l.Stage(ws)
	if err != nil {
		return 0, err
	}
	return s.Wait()
}

// publishBatch publishes a batch and waits for its acknowledgement.
//
// NB: every message but the last is a plain publish, the last a request:
// one round trip per batch. A message the server did not stage (no
// stream leader, a batch it refused to start) leaves a gap that makes the
// commit fail whole ("batch incomplete"), so the acknowledgement of the
// last message speaks for all of them.
func (l *Log) publishBatch(ctx context.Context, msgs []*nats.Msg) (*jetstream.PubAck, error) {
	last, err := l.publishAllButLast(msgs)
	if err != nil {
		return nil, err
	}
	return l.js.PublishMsg(ctx, last)
}

// publishAllButLast publishes a batch's messages but its last, in order,
// as plain publishes, and returns the last: the request whose
// acknowledgement speaks for them all (publishBatch, sendBatch).
func (l *Log) publishAllButLast(msgs []*nats.Msg) (*nats.Msg, error) {
	nc := l.js.Conn()
	for _, m := range msgs[:len(msgs)-1] {
		if err := nc.PublishMsg(m); err != nil {
			return nil, err
		}
	}
	return msgs[len(msgs)-1], nil
}

// jsErrAtomicPublishIncompleteBatch is nats-server's answer to the commit
// of a batch it did not stage whole; it stores none of it.
const jsErrAtomicPublishIncompleteBatch jetstream.ErrorCode = 10176

// batchNotStored reports whether err says for sure that the batch was not
// stored: a batch the server did not stage whole, or no stream leader to
// receive its commit. A timeout says nothing: the batch is in doubt.
func batchNotStored(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrAtomicPublishIncompleteBatch
}

// maxManifestBytes bounds a batch's manifest, and each of its chunks, whatever the servers' max_payload (limits).
const maxManifestBytes = 512 << 10

// limits are the batch limits of this log: the configured message count,
// and a chunk of at most half the server's maximum payload (at most 512
// KiB), leaving room for the headers and the estimate's error.
func (l *Log) limits() batchLimits {
	b := maxManifestBytes
	if mp := int(l.js.Conn().MaxPayload()); mp > 0 && mp/2 < b {
		b = mp / 2
	}
	return batchLimits{messages: l.cfg.maxBatchMessages(), bytes: b}
}

func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// CatchUp copies every group the stream holds beyond the local copy, up to
// the stream's last sequence when called (always the end of a group: a
// batch is stored whole), and returns how many groups it copied.
// A follower becoming the writer calls it before deciding anything, and a
// writer whose commit failed before it writes again (stage.go). It refuses
// while batches are in flight.
func (l *Log) CatchUp(ctx context.Context) (int, error) {
	info, err := callAPI(ctx, func(ctx context.Context) (*jetstream.StreamInfo, error) { return l.stream.Info(ctx) })
	if err != nil {
		return 0, fmt.Errorf("natslog: stream info: %w", err)
	}
	target := info.State.LastSeq
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight > 0 {
		return 0, fmt.Errorf("natslog: catch up with %d batches in flight", l.inflight)
	}
	l.failure = nil // a new term: the next Stage is fenced with what the copy holds
	if l.last >= target {
		return 0, nil
	}
	l.restartCopy()
	it, err := l.consume(ctx, l.next)
	if err != nil {
		return 0, err
	}
	defer it.Stop()
	n := 0
	for l.last < target {
		if l.next > target {
			// A batch is stored whole: the stream never ends inside one.
			return n, fmt.Errorf("%w: the stream ends at sequence %d inside the group of batch %s",
				ErrDiverged, target, l.pending.m.Batch)
		}
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return n, ctx.Err()
			}
			return n, fmt.Errorf("natslog: copy: %w", err)
		}
		done, err := l.copyLocked(m)
		if err != nil {
			return n, err
		}
		if done {
			n++
		}
	}
	return n, nil
}

// Follow copies groups as the stream receives them until ctx ends or an
// error, calling copied (on Follow's goroutine) whenever it has copied a
// group and no message is pending (its last read may be a void batch's),
// or every 256 groups: a follower's engine catches up then. It returns ctx.Err() when ctx ends.
func (l *Log) Follow(ctx context.Context, copied func()) error {
	l.mu.Lock()
	l.restartCopy()
	start := l.next
	l.mu.Unlock()
	it, err := l.consume(ctx, start)
	if err != nil {
		return err
	}
	defer it.Stop()
	since := 0
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("natslog: follow: %w", err)
		}
		l.mu.Lock()
		done, err := l.copyLocked(m)
		l.mu.Unlock()
		if err != nil {
			return err
		}
		if done {
			since++
		}
		// NB: also after a void batch, which is no group, at the stream's
		// end: the groups read before it, while it was pending, are told
		// of now.
		if since == 0 {
			continue
		}
		if md, _ := m.Metadata(); since >= 256 || md == nil || md.NumPending == 0 {
			copied()
			since = 0
		}
	}
}

// consume reads the stream from sequence start, in order, through one
// ordered consumer, which JetStream places on a replica of its choosing
// and the client starts again where it was when it misses messages or
// heartbeats.
//
// NB: one consumer for a whole copy, never one per pull (an ordered
// consumer's Fetch makes a new one each time). The reply to a consumer's
// creation can reach the client before the client's server learns of the
// consumer's interest in pull requests (they travel on different routes),
// and a pull sent in between is answered "no responders": a Fetch returns
// that as its error, and a copy that made a consumer every 256 messages
// met it every few dozen consumers, so a long stream could not be copied
// at all. A pull that meets it here goes unanswered, and the missed
// heartbeat starts the consumer again within a second.
//
// NB: the iterator is used on its caller's goroutine only, Stop included:
// Next waits on ctx itself (NextContext). Stopping it from another
// goroutine when ctx ends races with a Next that is starting the consumer
// again (the client installs the new subscription without the lock Stop
// takes), and the new subscription is then never stopped: the race
// detector caught it in a failover test.
func (l *Log) consume(ctx context.Context, start uint64) (jetstream.MessagesContext, error) {
	// NB: a bounded number of resets: the default retries forever, and a
	// copier whose server lost its quorum (a partition) would then wait
	// for it instead of failing, so its crewd never reconnected elsewhere.
	//
	// Its creation is one JetStream API call, bounded by apiTimeout as every
	// other (apiContext): under the caller's deadline alone (a starting
	// crewd's --open-timeout), a reply lost while NATS moved the stream's
	// leader held a start for minutes (found by the cluster's Jepsen run).
	// The consumer keeps no context of its creation (its resets bound their
	// own calls).
	actx, cancel := apiContext(ctx)
	cons, err := l.stream.OrderedConsumer(actx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start, MaxResetAttempts: 2})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("natslog: consumer: %w", err)
	}
	// Short pulls with frequent heartbeats: when the server serving the
	// consumer goes away, a missed heartbeat makes the ordered consumer
	// start again where it was within about a second, not half a minute.
	it, err := cons.Messages(jetstream.PullExpiry(2*time.Second), jetstream.PullHeartbeat(500*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("natslog: consume: %w", err)
	}
	return it, nil
}

// restartCopy puts the copier back at the end of the last whole group the
// local copy holds: a new consumer starts there, and a group read in part
// is read again.
func (l *Log) restartCopy() {
	l.next, l.pending = l.last+1, nil
}

// copyLocked takes one message, the next sequence, and once it completes a
// group that follows the local head, appends the group to the local copy
// (done); anything else is an error.
func (l *Log) copyLocked(m jetstream.Msg) (done bool, err error) {
	md, err := m.Metadata()
	if err != nil {
		return false, fmt.Errorf("natslog: message metadata: %w", err)
	}
	seq := md.Sequence.Stream
	if seq < l.next {
		return false, nil // already read (a consumer redelivery)
	}
	if seq != l.next {
		return false, fmt.Errorf("%w: sequence %d follows %d", ErrDiverged, seq, l.next-1)
	}
	g, err := l.copyMessage(seq, m.Subject(), m.Headers().Get(headerPrevBatch), m.Data())
	if err != nil {
		l.restartCopy()
		return false, fmt.Errorf("natslog: sequence %d: %w", seq, err)
	}
	l.next = seq + 1
	if g == nil {
		return false, nil // a group read in part
	}
	if g.void {
		// NB: not recorded in the local copy: a copy that starts again
		// after its last group reads this batch again and skips it again.
		l.last = seq
		return false, nil
	}
	if head, _ := l.local.Head(); head != g.after {
		l.restartCopy()
		return false, fmt.Errorf("%w: sequence %d follows position %d, the copy is at %d", ErrDiverged, seq, g.after, head)
	}
	if _, err := l.local.AppendFrom(seq, g.ws...); err != nil {
		l.restartCopy()
		return false, fmt.Errorf("natslog: copy sequence %d: %w", seq, err)
	}
	l.lastBatch = g.batch
	l.last = seq
	return true, nil
}
