package client

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// subscribeScript answers the k-th events.subscribe (k from 0, across connections) with steps(k, fc, id, params).
type subscribeScript struct {
	mu    sync.Mutex
	calls []subscribeParams
}

func (s *subscribeScript) handler(steps func(k int, fc *fakeConn, id string)) func(*fakeConn, wire.Request) {
	return func(fc *fakeConn, req wire.Request) {
		if req.Method != wire.MethodEventsSubscribe {
			pingHandler()(fc, req)
			return
		}
		var p subscribeParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			fc.b.errorf("events.subscribe params: %w", err)
			return
		}
		s.mu.Lock()
		k := len(s.calls)
		s.calls = append(s.calls, p)
		s.mu.Unlock()
		steps(k, fc, req.ID)
	}
}

func (s *subscribeScript) params() []subscribeParams {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]subscribeParams(nil), s.calls...)
}

func teamEvent(fc *fakeConn, seq uint64) {
	fc.push(wire.EventTeamEvent, seq, map[string]any{"type": "task.started", "position": seq})
}

func subscribed(fc *fakeConn, id string, since uint64) {
	fc.reply(id, map[string]any{"subscribed": true, "sinceSeq": since})
}

// collect reads n events from s and returns their seqs.
func collect(t *testing.T, s *Subscription, n int) []uint64 {
	t.Helper()
	var seqs []uint64
	for range n {
		ev, err := s.Next(testCtx(t))
		require.NoError(t, err)
		var data struct{ Position uint64 }
		require.NoError(t, json.Unmarshal(ev.Data, &data))
		require.Equal(t, ev.Seq, data.Position, "the data is the event at that seq")
		seqs = append(seqs, ev.Seq)
	}
	return seqs
}

// TestSubscriptionResyncIsTransparent: the broker delivers 1..3, drops 4 and 5 and says resync fromSeq 4; the
// client re-subscribes after 3, and the overlap the broker replays (3 again) is not yielded twice.
func TestSubscriptionResyncIsTransparent(t *testing.T) {
	var script subscribeScript
	b := newFakeBroker(t, script.handler(func(k int, fc *fakeConn, id string) {
		switch k {
		case 0:
			subscribed(fc, id, 0)
			for seq := uint64(1); seq <= 3; seq++ {
				teamEvent(fc, seq)
			}
			fc.push(wire.EventMailboxMessage, 0, map[string]string{"id": "m"}) // not for a subscription
			fc.send(wire.Resync{FromSeq: 4})
		case 1:
			subscribed(fc, id, 3)
			for seq := uint64(3); seq <= 6; seq++ {
				teamEvent(fc, seq)
			}
		}
	}))
	mailbox := 0
	c := dialT(t, b, worker, &Options{OnMailbox: func(wire.Event) { mailbox++ }})
	s, err := c.Subscribe(testCtx(t), 0, []string{"task.started"})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })

	require.Equal(t, []uint64{1, 2, 3, 4, 5, 6}, collect(t, s, 6))
	require.Equal(t, uint64(6), s.Last())
	require.Equal(t, 1, s.Resyncs())
	require.Equal(t, []subscribeParams{
		{SinceSeq: 0, Types: []string{"task.started"}},
		{SinceSeq: 3, Types: []string{"task.started"}},
	}, script.params())
	require.Equal(t, 2, b.connCount(), "the subscription has a connection of its own")
	require.Zero(t, mailbox, "a subscription's connection never calls OnMailbox")
	require.NoError(t, c.Call(testCtx(t), wire.MethodPing, nil, nil), "the client's connection is untouched")
}

// TestSubscriptionPushesBeforeAnswer: a broker that replays more than the client buffers before answering must not
// deadlock the subscription.
func TestSubscriptionPushesBeforeAnswer(t *testing.T) {
	var script subscribeScript
	b := newFakeBroker(t, script.handler(func(k int, fc *fakeConn, id string) {
		for seq := uint64(11); seq <= 30; seq++ {
			teamEvent(fc, seq)
		}
		subscribed(fc, id, 10)
	}))
	c := dialT(t, b, worker, &Options{EventBuffer: 4})
	s, err := c.Subscribe(testCtx(t), 10, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	var want []uint64
	for seq := uint64(11); seq <= 30; seq++ {
		want = append(want, seq)
	}
	require.Equal(t, want, collect(t, s, 20))
	require.Equal(t, []subscribeParams{{SinceSeq: 10}}, script.params())
}

// TestSubscriptionResyncWhileSubscribing: a resync that arrives before the answer to the subscribe is acted on
// once that answer is in.
func TestSubscriptionResyncWhileSubscribing(t *testing.T) {
	var script subscribeScript
	b := newFakeBroker(t, script.handler(func(k int, fc *fakeConn, id string) {
		switch k {
		case 0:
			teamEvent(fc, 1)
			fc.send(wire.Resync{FromSeq: 2})
			subscribed(fc, id, 0)
		case 1:
			subscribed(fc, id, 1)
			teamEvent(fc, 2)
			teamEvent(fc, 3)
		}
	}))
	c := dialT(t, b, worker, nil)
	s, err := c.Subscribe(testCtx(t), 0, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.Equal(t, []uint64{1, 2, 3}, collect(t, s, 3))
	require.Equal(t, []subscribeParams{{SinceSeq: 0}, {SinceSeq: 1}}, script.params())
}

func TestSubscriptionRefused(t *testing.T) {
	var script subscribeScript
	b := newFakeBroker(t, script.handler(func(k int, fc *fakeConn, id string) {
		fc.fail(id, wire.CodeForbidden, "forbidden")
	}))
	c := dialT(t, b, worker, nil)
	_, err := c.Subscribe(testCtx(t), 0, nil)
	require.Equal(t, wire.CodeForbidden, wire.CodeOf(err))
}

func TestSubscriptionGapIsAnError(t *testing.T) {
	var script subscribeScript
	b := newFakeBroker(t, script.handler(func(k int, fc *fakeConn, id string) {
		subscribed(fc, id, 0)
		teamEvent(fc, 1)
		teamEvent(fc, 3)
		fc.send(wire.Resync{FromSeq: 2}) // says 2 was dropped, after 3 was delivered
	}))
	c := dialT(t, b, worker, nil)
	s, err := c.Subscribe(testCtx(t), 0, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.Equal(t, []uint64{1, 3}, collect(t, s, 2))
	_, err = s.Next(testCtx(t))
	require.ErrorIs(t, err, ErrGap)
	_, err = s.Next(testCtx(t))
	require.ErrorIs(t, err, ErrGap, "sticky")
}

func TestSubscriptionCloseEndsNext(t *testing.T) {
	var script subscribeScript
	b := newFakeBroker(t, script.handler(func(k int, fc *fakeConn, id string) {
		subscribed(fc, id, 0)
	}))
	c := dialT(t, b, worker, nil)
	s, err := c.Subscribe(testCtx(t), 0, nil)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() {
		_, err := s.Next(testCtx(t))
		errc <- err
	}()
	require.NoError(t, s.Close())
	require.ErrorIs(t, <-errc, ErrClosed)
}

func TestSubscriptionDrainsBufferBeforeReportingClose(t *testing.T) {
	var script subscribeScript
	b := newFakeBroker(t, script.handler(func(k int, fc *fakeConn, id string) {
		subscribed(fc, id, 0)
		teamEvent(fc, 1)
		teamEvent(fc, 2)
		fc.conn.Close()
	}))
	c := dialT(t, b, worker, nil)
	s, err := c.Subscribe(testCtx(t), 0, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	<-s.c.Done()
	require.Equal(t, []uint64{1, 2}, collect(t, s, 2))
	_, err = s.Next(testCtx(t))
	require.ErrorIs(t, err, ErrClosed)
}
