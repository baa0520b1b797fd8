package cluster

import (
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/crewlog/crewlog/commands"
)

// maxForwardedBytes bounds the bytes of the forwarded requests the writer holds at once (forwardSlots): the NATS
// client's own bound on the messages a subscription holds undelivered (nats.DefaultSubPendingBytesLimit). A request
// is taken whatever its size when the writer holds none, so that no request the servers carry is refused for good.
const maxForwardedBytes = nats.DefaultSubPendingBytesLimit

// forwardSlots bounds the forwarded requests the writer holds at once, each a goroutine with its bytes (up to the
// servers' max_payload) that may wait up to ForwardTimeout in the engine: as many as its engine's queue holds
// (commands.Engine.QueueCap, four groups' worth), and maxForwardedBytes of them. A request over the bound is answered
// at once commands.ErrWriterBusy, deciding nothing; its follower sends it again after a pause, as a request waits for
// room in the queue of one crewd (forward.go).
//
// NB: a peer, or many followers' clients, publishing on the commands subject faster than the writer decides made it
// start a goroutine for each request, and hold its bytes, without bound. The queue's worth is enough: requests held
// beyond it would only wait for room in the queue.
type forwardSlots struct {
	slots int
	bytes int

	mu        sync.Mutex
	held      int
	heldBytes int
}

func newForwardSlots(slots, bytes int) *forwardSlots {
	return &forwardSlots{slots: max(slots, 1), bytes: bytes}
}

// take takes a slot for a request of size bytes, if there is one within the bounds.
func (s *forwardSlots) take(size int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held >= s.slots || s.held > 0 && s.heldBytes+size > s.bytes {
		return false
	}
	s.held++
	s.heldBytes += size
	return true
}

// give gives back the slot take took for a request of size bytes.
func (s *forwardSlots) give(size int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held--
	s.heldBytes -= size
}

// busyError is the writer's answer to a request over the bound, with the bound it met.
func (s *forwardSlots) busyError(size int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Errorf("%w (%d requests of %d bytes held, limits %d requests, %d bytes; this one %d bytes)",
		commands.ErrWriterBusy, s.held, s.heldBytes, s.slots, s.bytes, size)
}

// forwardedSize is what a forwarded request's message holds that its slot counts: its bytes and all of its headers,
// the credential's among them.
//
// NB: every header, not the credential's alone: the writer holds the whole message until it answers, and a peer's
// small request with a header of nearly max_payload counted a few bytes, so the bound held thousands of them.
func forwardedSize(m *nats.Msg) int {
	return len(m.Data) + headerBytes(m.Header)
}

// answerBusy answers m, a forwarded request over the writer's bound (forwardSlots), ErrWriterBusy at once.
func (n *Node) answerBusy(m *nats.Msg, size int) {
	err := n.forwards.busyError(size)
	n.peerWarns.warn(n.o.Logger, "the writer holds as many forwarded requests as it may: answered busy, to be sent "+
		"again", "node", n.o.Name, "err", err)
	b, eerr := commands.EncodeReply(commands.Reply{}, err)
	if eerr == nil {
		eerr = m.Respond(b)
	}
	if eerr != nil {
		n.lostAnswer("a forwarded request's busy answer could not be sent; its follower waits for it in vain", eerr,
			size)
	}
}
