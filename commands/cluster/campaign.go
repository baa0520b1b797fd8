package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog/natslog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// campaign follows the stream while another node writes, and takes the
// lease when it is free: then it becomes the writer until it fails.
func (n *Node) campaign() {
	defer n.wg.Done()
	followCtx, stopFollow := context.WithCancel(n.ctx)
	defer stopFollow()
	followDone := make(chan error, 1)
	// NB: counted in n.wg: a promotion given up may return before the
	// follower has stopped, and Close must not close the engine (nor its
	// owner the local log) under a copy still appending to it.
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		followDone <- n.jl.Follow(followCtx, func() {
			if n.o.beforeFold != nil {
				n.o.beforeFold(followCtx)
			}
			// An error here is the engine's own failure, which
			// watchEngine reports.
			_ = n.eng.CatchUp(followCtx)
		})
	}()
	t := time.NewTicker(n.o.LeaseTTL / 4)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			<-followDone
			return
		case err := <-followDone:
			if n.ctx.Err() == nil {
				n.fail(err)
			}
			return
		case <-t.C:
		}
		sent := time.Now()
		ok, err := n.lease.Acquire(n.ctx)
		if err != nil {
			n.o.Logger.Warn("cannot reach the writer lease", "node", n.o.Name, "err", err)
			continue
		}
		if !ok {
			continue
		}
		n.leased.Store(true)
		// NB: renewed from now on, not once promoted: copying and
		// folding the stream, and committing the engine config, can take
		// longer than the TTL, and a lease that expired meanwhile let a
		// second node take it and fence the first one's first commit.
		n.wg.Add(1)
		go n.keepLease(t, sent)
		if err := n.promote(stopFollow, followDone); err != nil {
			if n.ctx.Err() == nil { // not closed meanwhile
				n.fail(err)
			}
			return
		}
		n.tickClock()
		return
	}
}

// promoteStallFor is how long a promotion may go without copying or
// folding anything before it is given up: five lease TTLs and at least
// 10 s (a JetStream API call's own bound), so that a NATS leader election
// during a promotion does not cost a failover.
func (o *Options) promoteStallFor() time.Duration {
	if o.promoteStall > 0 {
		return o.promoteStall
	}
	return max(5*o.LeaseTTL, 10*time.Second)
}

// promote makes this node the writer, once it holds the lease: it stops
// following, copies the stream to its last sequence and folds it into the
// engine, so it decides against the whole log; the fence catches a group
// the old writer still slipped in.
//
// NB: the lease is renewed while it promotes (keepLease), so a promotion
// that hangs — a copy whose consumer waits on a stream that lost its
// leader — would hold the lease, with no writer, for as long as it hangs:
// every command in the cluster would wait. A watchdog gives the promotion
// up once it has made no progress for promoteStallFor; the node fails, and
// gives the lease up (giveUpLeaseOnFailure).
func (n *Node) promote(stopFollow func(), followDone <-chan error) error {
	ctx, cancel := context.WithCancelCause(n.ctx)
	defer cancel(nil)
	var folding atomic.Bool
	stopWatch := n.watchPromotion(cancel, &folding)
	defer stopWatch()
	stopFollow()
	select {
	case err := <-followDone:
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	case <-ctx.Done():
		return promoteErr(ctx, ctx.Err())
	}
	if n.o.beforePromote != nil {
		n.o.beforePromote(ctx)
	}
	if _, err := n.jl.CatchUp(ctx); err != nil {
		return promoteErr(ctx, err)
	}
	// NB: the fold is not watched: it is the engine's own work on the
	// local log, which cannot wait on NATS, and its head moves only once
	// it is done, so a long backlog would look like a stall.
	folding.Store(true)
	if n.o.duringPromotionFold != nil {
		n.o.duringPromotionFold(ctx)
	}
	err := n.eng.CatchUp(ctx)
	folding.Store(false)
	if err != nil {
		return promoteErr(ctx, err)
	}
	if err := context.Cause(ctx); err != nil {
		return promoteErr(ctx, err)
	}
	n.writer.Store(true)
	n.elected.Store(time.Now().UnixNano())
	if n.config != nil && !n.configInForce(*n.config) {
		r, err := n.eng.Submit(ctx, commands.Request{Actor: events.Actor{Role: events.RoleEngine},
			Command: &commands.Configure{Config: *n.config}})
		if err == nil && r.Rejected != nil {
			err = r.Rejected
		}
		if err != nil {
			return fmt.Errorf("cluster: put the engine config in force: %w", promoteErr(ctx, err))
		}
	}
	sub, err := n.o.Conn.QueueSubscribe(n.o.Log.CommandSubject(), "writer", n.serve)
	if err != nil {
		return err
	}
	n.sub.Store(sub)
	// NB: the subscription reaches the server asynchronously: until it does, a follower's forward (or a peer's
	// request) finds no responder. A round trip to the server makes Elected mean serving; the watchdog bounds it as
	// it bounds the promotion, and the flush wants a deadline of its own.
	fctx, fcancel := context.WithTimeout(ctx, n.o.promoteStallFor())
	err = n.o.Conn.FlushWithContext(fctx)
	fcancel()
	if err != nil {
		n.stopServing()
		return promoteErr(ctx, fmt.Errorf("cluster: subscribe to the commands subject: %w", err))
	}
	if n.ctx.Err() != nil {
		// NB: failed or closed while it subscribed, before fail or Close found a subscription to end.
		n.stopServing()
		return n.ctx.Err()
	}
	close(n.electedCh)
	n.o.Logger.Info("this crewd is the writer", "node", n.o.Name, "sequence", n.jl.Sequence())
	return nil
}

// configInForce reports whether c is the engine config the caught-up engine holds already. NB: a Configure of it
// would write nothing, but it would be refused disk-full, as every command is while the disk is short of space, and a
// node short of space could then never become the writer, where it may serve reads and answer commands disk-full
// until space is back.
func (n *Node) configInForce(c projections.Config) bool {
	var same bool
	n.eng.Read(func(s *projections.State) { same = commands.SameConfig(c, s.Config()) })
	return same
}

// promoteErr is err, or the watchdog's cause when it ended the promotion.
func promoteErr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrPromoteStalled) {
		return fmt.Errorf("%w (%v)", cause, err)
	}
	return err
}

// watchPromotion cancels the promotion (with ErrPromoteStalled) once the
// local copy's head and the engine's have both stood still for
// promoteStallFor, not counting the time folding is set, and returns the
// function that stops watching.
func (n *Node) watchPromotion(cancel context.CancelCauseFunc, folding *atomic.Bool) (stop func()) {
	stall := n.o.promoteStallFor()
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(stall / 10)
		defer tick.Stop()
		// NB: the local log's head, not the copier's sequence: the
		// copier holds its lock for the whole copy, so reading it here
		// would wait for the very copy that hangs.
		progress := func() [2]uint64 {
			head, _ := n.local.Head()
			return [2]uint64{head, n.eng.Head()}
		}
		last, since := progress(), time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				if p := progress(); p != last || folding.Load() {
					last, since = p, now
				} else if now.Sub(since) >= stall {
					n.o.Logger.Warn("promotion stalled; giving the lease up", "node", n.o.Name, "position", last[0],
						"after", stall)
					cancel(ErrPromoteStalled)
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

// keepLease renews the lease every tick of renew until the node stops, and
// fails the node once the lease is lost. held is when the last write of
// the lease that succeeded was sent: the lease lasts at least the TTL from
// then. A renewal that fails for want of an answer (a NATS leader
// election, a slow server) is tried again until three quarters of the TTL
// have passed since held; then another node may soon take the lease, and
// this one stops first. Each attempt may wait for its answer until then: a
// slow answer that comes in time keeps the lease (one abandoned earlier,
// and stored after all, is found by the next renewal: natslog.Lease.Renew).
// Safety does not rest on this (the fence does); it keeps a short election
// or a loaded machine from costing a failover. Once the node failed it gives
// the lease up (giveUpLeaseOnFailure).
func (n *Node) keepLease(renew *time.Ticker, held time.Time) {
	defer n.wg.Done()
	defer n.giveUpLeaseOnFailure()
	stopAfter := n.o.LeaseTTL * 3 / 4
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-renew.C:
		}
		if n.o.beforeRenew != nil {
			n.o.beforeRenew(n.ctx)
		}
		sent := time.Now()
		ctx, cancel := context.WithDeadline(n.ctx, held.Add(stopAfter))
		err := n.lease.Renew(ctx)
		cancel()
		switch {
		case err == nil:
			held = sent
		case n.ctx.Err() != nil:
			return
		case errors.Is(err, natslog.ErrLeaseLost):
			n.fail(err)
			return
		case time.Since(held) >= stopAfter:
			n.fail(fmt.Errorf("%w: no renewal answered within %v of the last: %w", ErrLeaseNotRenewed,
				stopAfter, err))
			return
		default:
			n.o.Logger.Warn("lease renewal failed; trying again", "node", n.o.Name, "err", err)
		}
	}
}

// giveUpLeaseOnFailure gives the lease up, if this node still holds it, once the node failed: a node that failed
// stages nothing more (Commit and Stage refuse), so another may take over at once. Safety rests on the fence, as
// ever: a batch the failed node had published already is stored before the next writer's first, which that one's
// fence then refuses (it fails stop and catches up), or is refused by its own.
//
// NB: at the failure, not at Close: its owner closes it only after answering reads for a while (crewd's drain), and
// the cluster had no writer until then, or until the TTL ran out for an owner that never closed it. Here, not in
// fail: keepLease is the lease's one user once it was taken (natslog.Lease is one goroutine's), and fail may run on
// another goroutine while a renewal is under way.
func (n *Node) giveUpLeaseOnFailure() {
	select {
	case <-n.failed:
	default:
		return // closed, not failed: Close gives the lease up
	}
	if n.o.Conn.IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if n.lease.Release(ctx) == nil {
		n.leased.Store(false) // NB: Close asks again only when this one found no answer (or the lease lost)
	}
}

// tickClock ticks the engine clock while the node writes, until it stops.
func (n *Node) tickClock() {
	tick := time.NewTicker(n.o.ExpiryInterval)
	defer tick.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-tick.C:
			n.eng.Tick(n.ctx)
		}
	}
}

// serve answers one forwarded request (the writer's command subscription).
// It decides on its own goroutine so that concurrent requests share the
// engine's group commits; the writer holds a bounded number of them at
// once, and answers one over the bound busy at once (forwardSlots).
func (n *Node) serve(m *nats.Msg) {
	if m.Reply == "" {
		// NB: not decided: a follower always asks for an answer, and a command decided for no one to hear would be
		// a change nobody learns of until a retry with its command id asks.
		n.lostAnswer("a message on the commands subject asks for no answer: not decided", nats.ErrMsgNoReply,
			len(m.Data))
		return
	}
	if !n.answerable(m.Reply) {
		// NB: not decided either: its answer would go to a subject no follower names (reply_subject.go).
		n.lostAnswer("a message on the commands subject asks for an answer on a subject that is no inbox: not "+
			"decided", fmt.Errorf("cluster: reply subject %q", m.Reply), len(m.Data))
		return
	}
	size := forwardedSize(m)
	if !n.forwards.take(size) {
		n.answerBusy(m, size)
		return
	}
	// NB: not counted in n.wg: a callback may still run after Close
	// unsubscribed; it then finds the engine closed and answers so.
	go func() {
		defer n.forwards.give(size)
		var rep commands.Reply
		r, err := commands.DecodeRequest(m.Data)
		if err == nil {
			// The credential the follower's broker checked against its copy, checked again against the state
			// the writer decides on (forward.go), with its bind position when it has one; none from a follower of
			// the build before forwarded credentials.
			r.Credential, err = credentialOfHeaders(m.Header)
		}
		switch {
		case err != nil:
		case !n.writer.Load():
			err = ErrNotWriter
		default:
			if n.o.beforeSubmit != nil {
				n.o.beforeSubmit(n.ctx)
			}
			ctx, cancel := context.WithTimeout(n.ctx, n.o.ForwardTimeout)
			rep, err = n.eng.Submit(ctx, r)
			cancel()
			if ferr := n.eng.Err(); err != nil && n.ctx.Err() != nil && ferr != nil {
				// NB: the node stopped because its engine failed (a fenced commit: another writer appended), which
				// cancels n.ctx: the request is answered with that failure, as the engine answers the requests it
				// held, not with the context the stop cancelled first.
				err = ferr
			}
		}
		b, eerr := commands.EncodeReply(rep, err)
		if eerr != nil {
			// The request may have been decided: its follower hears the writer's failure (in doubt), not nothing.
			n.lostAnswer("a forwarded request's answer could not be encoded; answered as the writer's "+
				"failure", eerr, 0)
			rep, err = commands.Reply{}, fmt.Errorf("cluster: encode the writer's answer: %w", eerr)
			if b, eerr = commands.EncodeReply(rep, err); eerr != nil {
				return
			}
		}
		answer := &nats.Msg{Data: b}
		if _, ended := err.(*commands.CredentialEndedError); err == nil || ended {
			// NB: read once Submit answered, when the group that decided the request is published: the
			// follower answers once its copy holds as much (forward.go's decidedOnHeader), the end of a
			// credential the writer refused included.
			answer.Header = nats.Header{}
			answer.Header.Set(decidedOnHeader, strconv.FormatUint(n.eng.Head(), 10))
		}
		if mp := n.o.Conn.MaxPayload(); mp > 0 && int64(len(b)+headerBytes(answer.Header)) > mp {
			// The answer does not fit one NATS message (answer_fit.go): sent cut to fit, its meaning kept.
			if answer.Data, eerr = fitAnswer(rep, err, len(b), int(mp)-headerBytes(answer.Header), mp); eerr != nil {
				n.lostAnswer("a forwarded request's answer does not fit one NATS message, even cut; its "+
					"follower waits for it in vain", eerr, len(b))
				return
			}
			n.peerWarns.warn(n.o.Logger, "a forwarded request's answer does not fit one NATS message: answered cut "+
				"to fit; raise the NATS servers' max_payload above --max-frame", "node", n.o.Name, "bytes", len(b),
				"max_payload", mp)
		}
		if rerr := m.RespondMsg(answer); rerr != nil {
			n.lostAnswer("a forwarded request's answer could not be sent; its follower waits for it in vain",
				rerr, len(b))
		}
	}()
}

// lostAnswer logs, with how many there have been, a forwarded request this writer answers no one: its follower
// waits for the attempt's bound, then sends a request with a command id again (and learns its recorded outcome)
// and answers one without ErrNoWriter, in doubt (forward.go). The lines are bounded (warnBound): anyone who may
// publish on the commands subject can send them.
func (n *Node) lostAnswer(what string, err error, bytes int) {
	lost := n.lostAnswers.Add(1)
	n.peerWarns.warn(n.o.Logger, what, "node", n.o.Name, "err", err, "bytes", bytes, "lost", lost)
}
