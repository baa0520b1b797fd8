package broker

import (
	"fmt"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// Bounds of an event type filter: events.subscribe's here, and the HTTP API's events route and stream use the
// same ones. The socket counts a type's length as pi-crew's JavaScript does (UTF-16 units), the HTTP API in bytes;
// event types are ASCII, so a filter of real types one accepts the other accepts too.
const (
	MaxTypeFilter = 64  // types in one filter
	MaxTypeLen    = 128 // length of one type
)

// subscription streams a run's events to one connection as team.event pushes: replay from sinceSeq, then live,
// by pulling the log from a cursor and waiting on the engine's signal for that run between pulls (a commit of
// another run wakes no subscriber of this one). Because there is
// one cursor, a seq is never repeated or skipped across replay and live (GS-18) — filtered types advance it too.
//
// It never blocks on the client: a push that finds the connection's queue full ends the subscription with ONE
// resync frame, {"event":"resync","data":{"fromSeq":N}}, N being the first seq not delivered. The connection
// stays authenticated; the client replays from N with events.since or subscribes again with sinceSeq N-1.
type subscription struct {
	c     *conn
	runID string
	next  uint64          // the next seq to deliver
	types map[string]bool // nil: every type
	stop  chan struct{}
	done  chan struct{} // closed when the goroutine has returned
}

type subscribeResult struct {
	Subscribed bool   `json:"subscribed"`
	SinceSeq   uint64 `json:"sinceSeq"`
}

// handleSubscribe: {sinceSeq? (default 0: the whole stream; negative counts as 0), types?: [string]} →
// {subscribed:true, sinceSeq}. A connection has at most one subscription: a new events.subscribe replaces the
// previous one (which is stopped before the answer, so no push of the old one follows it).
func handleSubscribe(cl *call) (any, error) {
	p := readParams(cl)
	since := p.sinceSeq()
	types := p.strs("types", MaxTypeFilter, MaxTypeLen)
	runID := p.run(cl)
	if p.err != nil {
		return nil, p.err
	}
	c := cl.c
	// NB: the first event the subscription would push is read before it is answered, so that a log that cannot give
	// it back is answered replay-failed, as events.since is. A subscription whose read fails ends with a resync
	// (pull), after which a client subscribes again: answered subscribed, it met the same resync for as long as the
	// log could not be read, and was never told so.
	// The read takes one of the credential's read turns, as events.since's does, and gives it back at once: the
	// old subscription, which this one waits for below, may be waiting for a turn itself.
	done, ok := c.readTurn()
	if !ok {
		return nil, errConnClosed
	}
	read, err := func() (int, error) {
		defer done() // NB: given back on every path, a panic the server recovers from included
		return readableFrom(c.s.log, runID, since+1)
	}()
	c.charge(read) // as every event read for the credential is, answered or refused
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errReplay, err)
	}
	sub := &subscription{c: c, runID: runID, next: since + 1, stop: make(chan struct{}), done: make(chan struct{})}
	if types != nil {
		sub.types = make(map[string]bool, len(types))
		for _, t := range types {
			sub.types[t] = true
		}
	}
	old, err := c.acquireSubscription(sub)
	if err != nil {
		return nil, err
	}
	if old != nil {
		close(old.stop)
		<-old.done
	}
	cl.after = func() {
		c.s.wg.Add(1)
		go sub.run()
	}
	return subscribeResult{Subscribed: true, SinceSeq: since}, nil
}

// readableFrom reads the event of stream at version from, if the log holds it, and returns the events it read (0 or
// 1) and the error of that read.
func readableFrom(l *eventlog.Log, stream string, from uint64) (read int, err error) {
	it := l.ReadStream(stream, from)
	if it.Next() {
		read = 1
	}
	return read, it.Close()
}

// ended reports whether the subscription's goroutine has returned (resync, replacement, close).
func (sub *subscription) ended() bool {
	select {
	case <-sub.done:
		return true
	default:
		return false
	}
}

func (sub *subscription) run() {
	c := sub.c
	defer c.s.wg.Done()
	defer close(sub.done)
	defer c.recover()
	for sub.wait() {
	}
}

// wait pulls once and waits for the next publish of the run: false ends the subscription. NB: the run's channel is
// left on every path, so a subscription of a run that publishes nothing more (cold, or never created) leaves nothing
// behind in the engine when it ends (commands' runNotifier).
func (sub *subscription) wait() bool {
	c := sub.c
	changed, leave := c.s.eng.RunChanged(sub.runID) // taken before reading, so a commit after the read still wakes us
	defer leave()
	if !c.pace(c.keys, sub.stop) {
		return false
	}
	ok, more := sub.pull()
	if !ok {
		return false
	}
	if more {
		return true // the scan stopped at maxScan to let the credential's other reads take their turn
	}
	select {
	case <-changed:
		return true
	case <-sub.stop:
		return false
	case <-c.done:
		return false
	}
}

// maxScan bounds the events one pull reads: a replay (or a type filter that matches little of a long run) is a
// page read like events.since, and takes turns with the credential's other page reads (readTurn).
const maxScan = 4096

// pull delivers published events from the cursor on, at most maxScan of them; ok false ends the subscription, more
// says the scan stopped at maxScan. It re-checks the connection's credential against the state it reads up to: an
// event published with or after a revocation, or the end of the credential's run or task, is never pushed — the
// connection ends instead.
func (sub *subscription) pull() (ok, more bool) {
	c := sub.c
	done, ok := c.readTurn()
	if !ok {
		return false, false
	}
	defer done()
	var (
		head uint64
		bad  *wire.Error
	)
	c.s.eng.Read(func(st *projections.State) { head, bad = st.Position, checkCredential(st, c.id) })
	if bad != nil {
		c.terminate(bad, reasonEnded)
		return false, false
	}
	if c.s.onPull != nil {
		c.s.onPull()
	}
	it := c.s.log.ReadStream(sub.runID, sub.next)
	defer it.Close()
	read := 0
	// Every event read costs its credential one unit, pushed or filtered out: a replay, or a filter that matches
	// little of a long run, is paced like requests. NB: the one read past the pull too, at maxScan or not yet
	// published, which the next pull reads again, as events.since is charged the one it reads past its page.
	defer func() { c.charge(read) }()
	for it.Next() {
		if read++; read > maxScan {
			return true, true
		}
		if it.Event().Position > head {
			break // not published yet: the next pull checks the state that holds it
		}
		select {
		case <-sub.stop:
			return false, false
		default:
		}
		r := it.Event()
		if sub.types != nil && !sub.types[r.Type] {
			sub.next = r.StreamVersion + 1
			continue
		}
		frame, err := sub.frame(r.StreamVersion, r)
		if err != nil {
			c.s.lg.Error("broker: subscription cannot render an event; sending resync", "runId", sub.runID,
				"seq", r.StreamVersion, "err", err)
			return sub.resync(), false
		}
		if !c.out.tryPush(frame) {
			return sub.resync(), false
		}
		sub.next = r.StreamVersion + 1
	}
	if err := it.Close(); err != nil {
		c.s.lg.Error("broker: subscription read failed; sending resync", "runId", sub.runID, "err", err)
		return sub.resync(), false
	}
	return true, false
}

// pushEnvelope is the bytes a team.event push takes besides its data, the newline included:
// {"event":"team.event","data":,"seq":18446744073709551615} (TestPushEnvelopeHoldsTheLongest measures it).
const pushEnvelope = 64

// frame encodes the push of the iterator's current event, as the first of its renditions that fits (fitEvent):
// whole, its data omitted, bare, bare of its run's id — the last fits in the smallest frame, so every seq is
// pushed.
func (sub *subscription) frame(seq uint64, r *eventlog.Event) ([]byte, error) {
	te, err := renderEvent(r, sub.c.viewer())
	if err != nil {
		return nil, err
	}
	max := sub.c.s.opts.MaxFrame
	data, err := fitEvent(te, max-pushEnvelope)
	if err != nil {
		return nil, err
	}
	f, err := wire.AppendFrame(nil, wire.Event{Name: wire.EventTeamEvent, Data: data, Seq: seq}, max)
	if err != nil {
		return nil, fmt.Errorf("broker: team.event %d does not fit in a frame: %w", seq, err)
	}
	return f, nil
}

// resync queues the one resync frame and ends the subscription, which counts no more against its credential's
// subscriptions from before the frame is queued: a client told of the resync may subscribe again at once, on any of
// its connections.
func (sub *subscription) resync() bool {
	sub.c.releaseSubscription(sub)
	f, _ := wire.AppendFrame(nil, wire.Resync{FromSeq: sub.next}, sub.c.s.opts.MaxFrame)
	if sub.c.out.pushControl(f) {
		sub.c.s.resyncs.Add(1)
		sub.c.s.lg.Debug("subscription overflow; resync sent", "conn", sub.c.seq, "runId", sub.runID,
			"fromSeq", sub.next)
	}
	return false
}
