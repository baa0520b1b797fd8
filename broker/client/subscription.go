package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/crewlog/crewlog/broker/wire"
)

// ErrGap is returned by Next when the broker's resync frame names a seq below one the subscription has already
// yielded: removing the overlap would then skip or repeat events, so the subscription stops rather than guess.
var ErrGap = errors.New("client: resync below an already delivered seq")

// Event is one log event pushed to a subscription: its position in the log and the broker's encoding of it.
type Event struct {
	Seq  uint64
	Data json.RawMessage
}

// subscribeParams is the params of events.subscribe. SinceSeq is exclusive: the broker replays from SinceSeq+1.
type subscribeParams struct {
	RunID    string   `json:"runId,omitempty"`
	SinceSeq uint64   `json:"sinceSeq"`
	Types    []string `json:"types,omitempty"`
}

// SubscribeOption refines a Subscribe.
type SubscribeOption func(*subscribeParams)

// WithRun names the run to subscribe to. A run-scoped credential (orchestrator, worker) always gets its own run
// and may omit it; the admin credential is scoped to no run and must name one.
func WithRun(runID string) SubscribeOption {
	return func(p *subscribeParams) { p.RunID = runID }
}

// Subscription is a stream of log events on a connection of its own. Next yields them in increasing seq order,
// each seq once, re-subscribing by itself after a resync.
//
// Concurrency: Next, Last and Resyncs belong to one goroutine; Close is safe from any goroutine and ends a Next
// waiting.
// Errors: Next's errors other than a context error are sticky; after one, resume with Subscribe(ctx, Last(), …).
type Subscription struct {
	c     *Client
	types []string
	runID string // "" for the credential's own run

	last    uint64             // highest seq yielded (or the starting sinceSeq)
	held    *wire.Event        // a push taken from the buffer before Next ran
	pending chan wire.Response // the answer of the subscribe in flight; nil when none
	// again is the resync fromSeq seen while a subscribe was in flight (0: none). The broker answers requests in
	// order, so re-subscribing once the in-flight one is answered is enough.
	again   uint64
	resyncs int
	err     error
}

// Subscribe opens a new connection with the Client's hello and subscribes to the events after sinceSeq whose type
// is in types (nil or empty: every type), of the credential's run or of the one named WithRun. It returns once the
// broker has accepted the subscription (its answer or its first push), or with the broker's refusal as a
// *wire.Error.
func (c *Client) Subscribe(ctx context.Context, sinceSeq uint64, types []string,
	opts ...SubscribeOption) (*Subscription, error) {
	var p subscribeParams
	for _, o := range opts {
		o(&p)
	}
	sc, err := dial(ctx, c.path, c.hello, c.opts, make(chan wire.Event, c.opts.EventBuffer))
	if err != nil {
		return nil, err
	}
	s := &Subscription{c: sc, types: append([]string(nil), types...), runID: p.RunID, last: sinceSeq}
	s.subscribe(sinceSeq)
	// NB: a push before the answer also means the broker accepted; holding it (rather than waiting on for the
	// answer) keeps the reader from blocking on a full buffer with the answer queued behind it.
	for s.err == nil && s.pending != nil && s.held == nil {
		select {
		case ev := <-sc.sink:
			s.held = &ev
		case resp := <-s.pending:
			s.answered(resp)
		case <-sc.done:
			// The reader may have delivered the answer or a push just before the connection ended (a broker that
			// answers, pushes and closes): select picks among ready cases at random, so look for them first.
			select {
			case resp := <-s.pending:
				s.answered(resp)
				continue
			case ev := <-sc.sink:
				s.held = &ev
				continue
			default:
			}
			s.err = fmt.Errorf("client: %s: %w", wire.MethodEventsSubscribe, sc.cause)
		case <-ctx.Done():
			s.err = fmt.Errorf("client: %s: %w", wire.MethodEventsSubscribe, ctx.Err())
		}
	}
	if s.err != nil {
		sc.Close()
		return nil, s.err
	}
	return s, nil
}

// Last is the seq of the last event Next yielded, or the sinceSeq the subscription started from: the point to
// resume from with a new Subscribe.
func (s *Subscription) Last() uint64 { return s.last }

// Resyncs is how many resync frames the subscription has recovered from: a measure of how far the consumer fell
// behind, since each one costs the broker a replay.
func (s *Subscription) Resyncs() int { return s.resyncs }

// Close ends the subscription and its connection; a Next waiting returns an error matching ErrClosed.
func (s *Subscription) Close() error { return s.c.Close() }

// Next returns the next event, waiting for it until ctx ends.
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	for s.err == nil {
		if s.held != nil {
			ev := *s.held
			s.held = nil
			if out, ok := s.handle(ev); ok {
				return out, nil
			}
			continue
		}
		select {
		case ev := <-s.c.sink:
			if out, ok := s.handle(ev); ok {
				return out, nil
			}
		case resp := <-s.pending: // nil, so never ready, when nothing is in flight
			s.answered(resp)
		case <-s.c.done:
			// Frames buffered before the close are still good; the sink is drained before the error shows.
			if len(s.c.sink) == 0 {
				s.err = s.c.cause
			}
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
	return Event{}, s.err
}

// handle yields a team event that is new, and turns a resync into a new subscription.
func (s *Subscription) handle(ev wire.Event) (Event, bool) {
	if ev.Name == wire.EventTeamEvent {
		if ev.Seq <= s.last {
			return Event{}, false // the overlap of a replay after a resync
		}
		s.last = ev.Seq
		return Event{Seq: ev.Seq, Data: ev.Data}, true
	}
	from := ev.Seq // a resync: the first seq not delivered
	s.resyncs++
	switch {
	case from <= s.last:
		s.err = fmt.Errorf("%w: fromSeq %d, delivered up to %d", ErrGap, from, s.last)
	case s.pending != nil:
		if s.again == 0 || from < s.again {
			s.again = from
		}
	default:
		s.subscribe(from - 1)
	}
	return Event{}, false
}

// subscribe sends events.subscribe without waiting for the answer, which Next or Subscribe picks up.
func (s *Subscription) subscribe(since uint64) {
	// NB: a background context is safe: this connection has at most one request in flight, so the writer
	// queue always has room, and the send fails at once if the connection is gone.
	_, ch, err := s.c.start(context.Background(), wire.MethodEventsSubscribe,
		subscribeParams{RunID: s.runID, SinceSeq: since, Types: s.types})
	if err != nil {
		s.err = err
		return
	}
	s.pending = ch
}

func (s *Subscription) answered(resp wire.Response) {
	s.pending = nil
	if resp.Error != nil {
		s.err = fmt.Errorf("client: %s: %w", wire.MethodEventsSubscribe, resp.Error)
		return
	}
	if from := s.again; from != 0 {
		s.again = 0
		s.subscribe(from - 1)
	}
}
