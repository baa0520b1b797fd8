package broker

import (
	"encoding/json"

	"github.com/crewlog/crewlog/broker/wire"
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

// feed follows the whole log for two jobs that need every run's events: mailbox.message pushes, and ending the
// connections whose credential an event ended (revocation, a terminal run or task: closeEnded). One goroutine
// follows the log from position next (the first after the head at which the server began to accept connections),
// reading only events the published state holds (so a push never precedes durability, and a re-check sees the event
// that triggered it), and for each mailbox.appended finds the connections of that run whose recipient it is: the
// worker of the task, or the orchestrator for the run inbox. One follower for the server, not one per connection:
// idle connections cost nothing per event.
//
// Pushes are best effort, as in pi-crew: a push that finds a connection's queue full is dropped (the message is
// durable; msg.inbox is the source of truth). A frame over the cap is not pushed either.
func (s *Server) feed(next uint64) {
	defer s.wg.Done()
	defer func() {
		if r := recover(); r != nil {
			s.lg.Error("broker: panic in the mailbox feed; pushes stop", "panic", r)
		}
	}()
	if s.feedStarting != nil {
		s.feedStarting()
	}
	// NB: the strings every push and settlement repeats (the run's task ids, a message's sender, kind and priority)
	// are shared between the payloads it decodes rather than copied out of each one.
	dec := events.NewDecoder()
	for {
		changed := s.eng.Changed()
		head := s.eng.Head() // NB: after Changed: a publish past head wakes us again
		// NB: transient: nothing below keeps a record's strings or payload past the next record (a push is
		// encoded, and a re-check done, before it), so no record is copied out of the storage engine.
		it := s.log.ReadTransient(next)
		for next <= head && it.Next() {
			r := it.Event()
			if r.Position > head {
				break
			}
			next = r.Position + 1
			s.importCheckpointSeen(r.Stream)
			if !s.hasConns(r.Stream) {
				continue
			}
			if endsCredentials(r.Type) {
				box, narrowed := endedBox(dec, r)
				s.closeEnded(r.Stream, box, narrowed) // now, before any later push of this run
				continue
			}
			if r.Type != events.TypeMailboxAppended {
				continue
			}
			ev, err := projections.FromLogWith(dec, r)
			if err != nil {
				s.lg.Error("broker: mailbox feed cannot decode an event", "position", r.Position, "err", err)
				continue
			}
			if p, ok := ev.Payload.(*events.MailboxAppended); ok {
				s.pushMessage(ev.Stream, r.Position, p)
			}
		}
		if err := it.Close(); err != nil {
			s.lg.Error("broker: mailbox feed read failed; retrying at the next commit", "err", err)
		}
		select {
		case <-changed:
		case <-s.quit:
			return
		}
	}
}

func (s *Server) hasConns(runID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byRun[runID]) > 0
}

// pushMessage pushes message m, appended at log position pos, to its recipient's connections of runID that said
// hello after it was published: a message that was already in the inbox at hello is msg.inbox's to show, so
// whether it is pushed does not depend on how far the feed has got.
func (s *Server) pushMessage(runID string, pos uint64, m *events.MailboxAppended) {
	to := m.To
	if to == events.RunInbox {
		to = runInboxName
	}
	data, err := json.Marshal(mailboxPush{ID: m.ID, From: m.From, To: to, Body: m.Body, Kind: m.Kind, Priority: m.Priority,
		QuestionID: m.QuestionID})
	if err != nil {
		return
	}
	frame, err := wire.AppendFrame(nil, wire.Event{Name: wire.EventMailboxMessage, Data: data}, s.opts.MaxFrame)
	if err != nil {
		s.lg.Debug("mailbox push over the frame cap; not pushed", "runId", runID, "id", m.ID)
		return
	}
	s.mu.Lock()
	var targets []*conn
	for c := range s.byBox[mailboxKey{runID, m.To}] { // NB: the run inbox is "", the orchestrators' box
		if c.boundAt < pos {
			targets = append(targets, c)
		}
	}
	s.mu.Unlock()
	for _, c := range targets {
		if !c.out.tryPush(frame) {
			s.lg.Debug("mailbox push dropped: outbound queue full", "conn", c.seq, "id", m.ID)
		}
	}
}
