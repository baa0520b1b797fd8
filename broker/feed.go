package broker

import (
	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// mailboxPush is the data of a mailbox.message push (D§7.7): {id, from, to, body, kind, priority}, and the
// questionId of a response that answers a parked question, so a waiting ask tool learns of its answer from the push.
type mailboxPush struct {
	ID         string `json:"id"`
	From       string `json:"from"`
	To         string `json:"to"`
	Body       string `json:"body"`
	Kind       string `json:"kind"`
	Priority   string `json:"priority"`
	QuestionID string `json:"questionId,omitempty"`
}

// appendJSON appends json.Marshal(p), byte for byte (TestMailboxPushEncodesAsJSONMarshal), without its reflection:
// the feed encodes one for every message a connection is there to be pushed.
func (p *mailboxPush) appendJSON(b []byte) []byte {
	members := [...]struct{ key, value string }{
		{`{"id":`, p.ID}, {`,"from":`, p.From}, {`,"to":`, p.To}, {`,"body":`, p.Body}, {`,"kind":`, p.Kind},
		{`,"priority":`, p.Priority}, {`,"questionId":`, p.QuestionID},
	}
	for i, m := range members {
		if i == len(members)-1 && m.value == "" {
			break // omitempty
		}
		b = append(b, m.key...)
		b = wire.AppendJSONString(b, m.value) // NB: a body's lines escaped in place
	}
	return append(b, '}')
}

// pushScratch is what the feed's goroutine reuses from one mailbox push to the next: the push's data as it encodes
// it, and the connections it goes to.
type pushScratch struct {
	data    []byte
	targets []*conn
}

// maxPushScratch is the most bytes of a push's data the feed keeps its buffer at for the next push: a message's body
// may take a frame, and one such message would otherwise keep that much for the server's life.
const maxPushScratch = 16 << 10

// feedTapBound is how many published events the feed's tap holds for it: some seventy groups of crewbench's 64
// clients on one run, under 1.5 MB of events (their payloads are the published state's). A feed that falls further
// behind reads what the tap dropped from the log.
const feedTapBound = 8192

// feed follows the whole log for two jobs that need every run's events: mailbox.message pushes, and ending the
// connections whose credential an event ended (revocation, a terminal run or task: closeEnded). One goroutine
// follows the log from position next (the first after the head at which the server began to accept connections),
// taking only events the published state holds (so a push never precedes durability, and a re-check sees the event
// that triggered it), and for each mailbox.appended finds the connections of that run whose recipient it is: the
// worker of the task, or the orchestrator for the run inbox. One follower for the server, not one per connection:
// idle connections cost nothing per event.
//
// It takes the events from tap, the engine's copy of each group it publishes, taken before next was read, and
// reads from the log only what the tap lacks (what it dropped while the feed fell behind): an iterator opened and
// each record decoded again at every publish cost the socket server about a twentieth of its CPU (docs/benchmarks.md,
// "The mailbox feed takes the published events").
//
// Pushes are best effort, as in pi-crew: a push that finds a connection's queue full is dropped (the message is
// durable; msg.inbox is the source of truth). A frame over the cap is not pushed either.
func (s *Server) feed(next uint64, tap *commands.Tap) {
	defer s.wg.Done()
	defer tap.Close()
	defer func() {
		if r := recover(); r != nil {
			eventlog.RepanicFatal(r) // the store answers nothing more: crewd exits
			s.lg.Error("broker: panic in the mailbox feed; pushes stop", "panic", r)
		}
	}()
	if s.feedStarting != nil {
		s.feedStarting()
	}
	// NB: the strings every push and settlement repeats (the run's task ids, a message's sender, kind and priority)
	// are shared between the payloads it decodes rather than copied out of each one.
	dec := events.NewDecoder()
	var scratch pushScratch
	var taken []events.Event
	for {
		changed := s.eng.Changed()
		taken = tap.Take(taken[:0])
		head := s.eng.Head() // NB: after Changed: a publish past head wakes us again
		upTo := head
		if len(taken) > 0 {
			upTo = min(head, taken[0].Position-1)
		}
		if next <= upTo {
			next = s.feedFromLog(dec, &scratch, next, upTo)
		}
		for i := range taken {
			if ev := &taken[i]; ev.Position == next {
				s.feedEvent(&scratch, ev)
				next++
			}
		}
		clear(taken) // NB: no payload is kept reachable past its turn
		select {
		case <-changed:
		case <-s.quit:
			return
		}
	}
}

// feedJob is what the feed does with an event.
type feedJob int

const (
	feedNothing feedJob = iota
	feedEnding          // re-check the connections it can end (closeEnded)
	feedPush            // push the message it appends (pushMessage)
)

// jobOf counts an event of stream and eventType towards the import view and says what else the feed does with it.
func (s *Server) jobOf(stream, eventType string) feedJob {
	s.importCheckpointSeen(stream)
	switch {
	case !s.hasConns(stream):
		return feedNothing
	case endsCredentials(eventType):
		return feedEnding
	case eventType == events.TypeMailboxAppended:
		return feedPush
	}
	return feedNothing
}

// feedEvent does the feed's jobs for ev, an event the tap gave it.
func (s *Server) feedEvent(sc *pushScratch, ev *events.Event) {
	switch s.jobOf(ev.Stream, ev.Type) {
	case feedEnding:
		box, narrowed := endedBoxOf(ev)
		s.closeEnded(ev.Stream, box, narrowed) // now, before any later push of this run
	case feedPush:
		if p := events.PayloadAs[events.MailboxAppended](*ev); p != nil {
			s.pushMessage(sc, ev.Stream, ev.Position, p)
		}
	}
}

// feedFromLog does the feed's jobs for the log's events from position next up to upTo, and returns the position
// after the last one it read (upTo + 1 unless the read failed, which is tried again at the next publish).
func (s *Server) feedFromLog(dec *events.Decoder, sc *pushScratch, next, upTo uint64) uint64 {
	s.feedLogReads.Add(1)
	// NB: transient: nothing below keeps a record's strings or payload past the next record (a push is encoded, and
	// a re-check done, before it), so no record is copied out of the storage engine.
	it := s.log.ReadTransient(next)
	for next <= upTo && it.Next() {
		r := it.Event()
		if r.Position > upTo {
			break
		}
		next = r.Position + 1
		switch s.jobOf(r.Stream, r.Type) {
		case feedEnding:
			box, narrowed := endedBox(dec, r)
			s.closeEnded(r.Stream, box, narrowed) // now, before any later push of this run
		case feedPush:
			ev, err := projections.FromLogWith(dec, r)
			if err != nil {
				s.lg.Error("broker: mailbox feed cannot decode an event", "position", r.Position, "err", err)
				continue
			}
			if p, ok := ev.Payload.(*events.MailboxAppended); ok {
				s.pushMessage(sc, ev.Stream, r.Position, p)
			}
		}
	}
	if err := it.Close(); err != nil {
		s.lg.Error("broker: mailbox feed read failed; retrying at the next commit", "err", err)
	}
	return next
}

func (s *Server) hasConns(runID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byRun[runID]) > 0
}

// pushMessage pushes message m, appended at log position pos, to its recipient's connections of runID that said
// hello after it was published: a message that was already in the inbox at hello is msg.inbox's to show, so
// whether it is pushed does not depend on how far the feed has got. sc is the caller's scratch (the feed's own).
//
// NB: the recipients are found first, and a message none is there for is not encoded; the frame is the one
// allocation of a push (its data is encoded into sc, and framed as the compact JSON it is, not checked again).
func (s *Server) pushMessage(sc *pushScratch, runID string, pos uint64, m *events.MailboxAppended) {
	s.mu.Lock()
	targets := sc.targets[:0]
	for c := range s.byBox[mailboxKey{runID, m.To}] { // NB: the run inbox is "", the orchestrators' box
		if c.boundAt < pos {
			targets = append(targets, c)
		}
	}
	s.mu.Unlock()
	defer func() {
		clear(targets) // NB: no connection is kept reachable by the scratch once closed
		sc.targets = targets[:0]
	}()
	if len(targets) == 0 {
		return
	}
	frame, err := mailboxPushFrame(sc, m, s.opts.MaxFrame)
	if err != nil {
		s.lg.Debug("mailbox push over the frame cap; not pushed", "runId", runID, "id", m.ID)
		return
	}
	for _, c := range targets {
		if !c.out.tryPush(frame) {
			s.lg.Debug("mailbox push dropped: outbound queue full", "conn", c.seq, "id", m.ID)
		}
	}
}

// mailboxPushFrame is the mailbox.message push of m, its data encoded into sc: AppendFrame's bytes of the Event of
// json.Marshal's mailboxPush, or the error that refuses a frame over maxFrame.
func mailboxPushFrame(sc *pushScratch, m *events.MailboxAppended, maxFrame int) ([]byte, error) {
	to := m.To
	if to == events.RunInbox {
		to = runInboxName
	}
	p := mailboxPush{ID: m.ID, From: m.From, To: to, Body: m.Body, Kind: m.Kind, Priority: m.Priority,
		QuestionID: m.QuestionID}
	sc.data = p.appendJSON(sc.data[:0])
	frame, err := wire.AppendCompactEvent(nil, wire.EventMailboxMessage, sc.data, 0, maxFrame)
	if cap(sc.data) > maxPushScratch {
		sc.data = nil
	}
	return frame, err
}
