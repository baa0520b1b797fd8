package natslog

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/crewlog/crewlog/eventlog"
)

// The writer's pipeline: Stage publishes a group's batches and returns
// without waiting for their acknowledgement, so the writer decides and
// publishes the next group while JetStream replicates and fsyncs this one;
// Wait, called once per Stage and in Stage order, awaits the
// acknowledgements and appends the group to the local copy.
//
// Each batch is fenced with the expected last sequence of the whole stream
// as it will be once every batch staged before it is stored: the fence of
// group N+1 is the last sequence of group N. So if group N is not stored,
// JetStream refuses N+1 too (the stream does not end where N+1 expects), and
// nothing staged after a failure is ever appended to the local copy or
// answered: the first failed Wait fails every Wait after it, and every
// Stage until CatchUp.
//
// NB: a sequence alone is not a unique fence once batches are in flight. A
// deposed writer whose group N is refused because another writer stored a
// group of exactly N's size has a group N+1 whose fence matches that other
// group's end, and JetStream stores it. Its manifest names the batch it
// follows (Crewlog-Prev-Batch: N's id), which is not the last batch in the
// stream: every copy takes such a batch as void and skips it (copy.go), and
// the writer it landed behind is fenced by it and catches up past it. A
// deposed writer appends nothing to the log either way.

// Staged is a group published by Stage and not yet waited for.
type Staged struct {
	l       *Log
	batches []*flightBatch
}

// flightBatch is one batch of a staged group.
type flightBatch struct {
	ws      []eventlog.Write
	after   uint64 // the local head it follows
	fence   uint64 // the stream sequence it expects last
	msgs    int
	id      string
	ack     jetstream.PubAckFuture // nil when the send failed (sendErr)
	sendAt  time.Time
	sendErr error
}

// Stage checks ws against the local copy, cuts it into batches (batch.go)
// and publishes them, each fenced with the stream's last sequence as it
// will be once every batch staged before is stored, and returns without
// waiting for their acknowledgement. Call Wait exactly once on a
// successful Stage, in Stage order (from any one goroutine). Its errors are
// Commit's; after a failed Wait, every Stage returns that failure until
// CatchUp (landed).
//
// NB: ws is checked against the local copy, which does not yet hold the
// groups in flight: a command id of ws that is also in a group in flight is
// not refused here (the engine never stages one: it follows its own
// retries), and a write with expected stream versions waits until nothing
// is in flight, so that its versions are checked against every group
// before it.
func (l *Log) Stage(ws []eventlog.Write) (*Staged, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.writable {
		return nil, fmt.Errorf("natslog: stream %s: %w", l.cfg.Stream, errFirstLayout)
	}
	if hasExpectations(ws) {
		for l.inflight > 0 {
			l.drained.Wait()
		}
	}
	if l.failure != nil {
		return nil, l.failure
	}
	if err := l.local.Check(ws...); err != nil {
		return nil, err
	}
	lim := l.limits()
	parts, err := planBatches(ws, lim)
	if err != nil {
		return nil, err
	}
	if l.inflight == 0 {
		head, _ := l.local.Head()
		l.staged = stagedEnd{seq: l.last, head: head, batch: l.lastBatch}
	}
	s := &Staged{l: l, batches: make([]*flightBatch, len(parts))}
	msgs := make([][]*nats.Msg, len(parts))
	end := l.staged
	for i, part := range parts {
		b := &flightBatch{ws: part, after: end.head, fence: end.seq, id: l.nextBatchID()}
		if msgs[i], err = encodeBatch(l.cfg, lim, b.id, end.batch, b.after, b.fence, part); err != nil {
			return nil, err
		}
		b.msgs = len(msgs[i])
		end = stagedEnd{seq: end.seq + uint64(b.msgs), head: end.head + countEvents(part), batch: b.id}
		s.batches[i] = b
	}
	// NB: sent in order on one connection, so the server checks each
	// batch's fence after the batches staged before it.
	for i, b := range s.batches {
		b.sendAt = time.Now()
		b.ack, b.sendErr = l.sendBatch(l.lose(1, msgs[i]))
	}
	l.staged = end
	l.inflight += len(s.batches)
	return s, nil
}

// stagedEnd is where the stream and the local copy will end once every
// staged batch is stored: the next batch's fence, position and Prev.
type stagedEnd struct {
	seq   uint64
	head  uint64
	batch string
}

// Wait waits for the staged group's acknowledgement (stored whole on a
// majority of replicas, each fsynced) and appends it to the local copy,
// and returns its first position. A batch that the server says it did not
// store (no stream leader, a batch it did not receive whole) is published
// again, against the same fence, until the publish timeout. An error
// fails every group staged after this one.
func (s *Staged) Wait() (first uint64, err error) {
	l := s.l
	for i, b := range s.batches {
		f, err := l.waitBatch(b)
		if err != nil {
			// The group's remaining batches are in flight too: their
			// Waits release them, and fail.
			for _, rest := range s.batches[i+1:] {
				_, _ = l.waitBatch(rest)
			}
			if i > 0 {
				err = fmt.Errorf("%w (after %d of the group's %d batches committed)", err, i, len(s.batches))
			}
			return 0, err
		}
		if i == 0 {
			first = f
		}
	}
	return first, nil
}

// waitBatch awaits one batch and appends it; it releases the batch's place
// in flight whatever the outcome.
func (l *Log) waitBatch(b *flightBatch) (uint64, error) {
	ack, err := l.awaitAck(b)
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.landed()
	if l.failure != nil {
		// NB: even when this batch was stored (the failure was a lost
		// acknowledgement): the local copy does not hold the group before
		// it, and a successor copies both from the stream.
		return 0, l.failure
	}
	if err != nil && (batchNotStored(err) || l.retrying && isWrongLastSequence(err)) {
		// NB: a batch that followed one that had to be published again was
		// refused for that batch's first attempt (the stream did not end
		// where it expected): it is not stored either.
		l.retrying = true
		ack, err = l.republish(b)
	}
	if isWrongLastSequence(err) {
		err = fmt.Errorf("%w (expected sequence %d)", ErrFenced, b.fence)
	} else if err != nil {
		err = fmt.Errorf("natslog: publish a batch of %d messages: %w", b.msgs, err)
	} else if ack.Sequence != b.fence+uint64(b.msgs) || b.fence != l.last {
		err = fmt.Errorf("%w: the batch of %d messages after sequence %d ended at sequence %d, the copy is at %d",
			ErrDiverged, b.msgs, b.fence, ack.Sequence, l.last)
	}
	if err != nil {
		l.failure = err
		return 0, err
	}
	first, err := l.local.AppendFromUnsynced(ack.Sequence, b.ws...)
	if err != nil {
		l.failure = err
		return 0, err
	}
	l.last, l.next, l.lastBatch = ack.Sequence, ack.Sequence+1, b.id
	return first, nil
}

// awaitAck waits for the acknowledgement of b's first attempt, at most the
// publish timeout after it was sent. A send that failed is not stored.
func (l *Log) awaitAck(b *flightBatch) (*jetstream.PubAck, error) {
	if b.sendErr != nil {
		return nil, fmt.Errorf("%w: %w", jetstream.ErrNoStreamResponse, b.sendErr)
	}
	if l.loseAck != nil && l.loseAck(b.fence) {
		return nil, errInDoubt(l.cfg) // as if the timeout passed: no need to wait it out
	}
	timer := time.NewTimer(time.Until(b.sendAt.Add(l.cfg.publishTimeout())))
	defer timer.Stop()
	select {
	case ack := <-b.ack.Ok():
		return ack, nil
	case err := <-b.ack.Err():
		return nil, err
	case <-timer.C:
		return nil, errInDoubt(l.cfg)
	}
}

func errInDoubt(c Config) error {
	return fmt.Errorf("natslog: no acknowledgement within %s: the batch is in doubt", c.publishTimeout())
}

// republish publishes b again under a new id, against the same fence and
// after the batch the local copy ended with, until it is stored, refused
// for another reason, or the publish timeout from now. Called with l.mu
// held, by the Wait of the oldest batch in flight.
func (l *Log) republish(b *flightBatch) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.publishTimeout())
	defer cancel()
	lim := l.limits()
	for attempt := 2; ; attempt++ {
		b.id = l.nextBatchID()
		msgs, err := encodeBatch(l.cfg, lim, b.id, l.lastBatch, b.after, b.fence, b.ws)
		if err != nil {
			return nil, err
		}
		ack, err := l.publishBatch(ctx, l.lose(attempt, msgs))
		if err == nil || !batchNotStored(err) || ctx.Err() != nil {
			return ack, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt-1) * 100 * time.Millisecond):
		}
	}
}

// landed releases one batch's place in flight; once none is, writes that
// wait for the pipeline to drain go on.
//
// NB: a failure outlives the batches in flight: a writer may stage its next
// group, decided on a state that holds the failed one, after the failed
// Wait returned and before it learnt of the failure; published against the
// local copy's sequence, that group could be stored without the one it
// follows. Every Stage and Commit refuses until CatchUp has brought the
// local copy to the stream again (a new term).
func (l *Log) landed() {
	l.inflight--
	if l.inflight == 0 {
		l.retrying = false
		l.drained.Broadcast()
	}
}

func (l *Log) nextBatchID() string {
	l.batches++
	return l.batchID + "-" + strconv.FormatUint(l.batches, 36)
}

// lose applies the test hook that drops messages of an attempt.
func (l *Log) lose(attempt int, msgs []*nats.Msg) []*nats.Msg {
	if l.loseMessages != nil {
		return l.loseMessages(attempt, msgs)
	}
	return msgs
}

// sendBatch sends a batch's messages in order, its last one as an
// asynchronous request whose acknowledgement speaks for them all.
func (l *Log) sendBatch(msgs []*nats.Msg) (jetstream.PubAckFuture, error) {
	last, err := l.publishAllButLast(msgs)
	if err != nil {
		return nil, err
	}
	// NB: no retry of a commit the server had no responder for: sent again
	// alone, after later batches, it would only confuse the order.
	return l.js.PublishMsgAsync(last, jetstream.WithRetryAttempts(0))
}

func hasExpectations(ws []eventlog.Write) bool {
	for i := range ws {
		if len(ws[i].Expected) > 0 {
			return true
		}
	}
	return false
}

func countEvents(ws []eventlog.Write) uint64 {
	n := 0
	for i := range ws {
		n += len(ws[i].Events)
	}
	return uint64(n)
}
