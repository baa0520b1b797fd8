package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/crewlog/crewlog/commands"
)

// Forward implements commands.Forwarder: a follower sends the request to
// the writer over NATS and answers with the writer's reply.
//
// NB: forwarding, not redirecting: pi-crew's clients speak to one socket
// and know no other crewd, so a redirect would be an error they cannot
// follow. While there is no writer (a failover) the request waits and is
// sent again; a request that may have reached a writer (a timeout, a
// writer that failed mid-group) is sent again only with a command id, whose
// recorded outcome makes the retry harmless — without one it is answered
// ErrNoWriter, in doubt, as a crash of a single crewd would leave it.
//
// The answer comes once this node's copy holds the command's events, so a
// client reads its own writes on the crewd it talks to.
func (n *Node) Forward(ctx context.Context, r commands.Request) (commands.Reply, bool, error) {
	if n.writer.Load() {
		return commands.Reply{}, false, nil
	}
	data, err := commands.EncodeRequest(r)
	if err != nil {
		return commands.Reply{}, true, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.o.ForwardTimeout)
		defer cancel()
	}
	backoff := 10 * time.Millisecond
	// inDoubt is set once an attempt may have reached a writer and been
	// decided (no answer, or a writer's failure): a later answer that
	// nothing was decided speaks only for its own attempt.
	inDoubt := false
	for {
		if n.writer.Load() {
			return commands.Reply{}, false, nil // became the writer meanwhile
		}
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := n.o.Conn.RequestWithContext(actx, n.o.Log.CommandSubject(), data)
		cancel()
		var rep commands.Reply
		retry := false
		switch {
		case err == nil:
			rep, err = commands.DecodeReply(m.Data)
			if err == nil {
				if answerBeforeCopied && delegation(r) {
					return rep, true, nil
				}
				return rep, true, n.waitCopied(ctx, rep.Position)
			}
			if (errors.Is(err, commands.ErrNoSpace) || errors.Is(err, commands.ErrResultTooLarge)) && !inDoubt {
				// The writer's disk is short, or the result would not
				// fit the client's frame: it recorded nothing, and the
				// client hears so (disk-full, oversize-frame), as from
				// one crewd. NB: not after an attempt in doubt — the
				// writer checks its space before it looks the command
				// id up, and answers a result too large without a
				// commit, so a command decided then (and still landing)
				// would be answered so.
				return commands.Reply{}, true, err
			}
			// The node asked was not the writer and decided nothing.
			notWriter := errors.Is(err, commands.ErrNotWriter)
			inDoubt = inDoubt || !notWriter
			retry = notWriter || r.CommandID != ""
		case errors.Is(err, nats.ErrMaxPayload) && !inDoubt:
			// Nothing was sent: the request is larger than a NATS
			// message. Refused, recording nothing, as the writer
			// refuses a command whose event no message can carry.
			return commands.Reply{Rejected: &commands.RejectedError{Code: commands.CodeBadParams, Reason: "invalid-params",
				Message: fmt.Sprintf("%s: a request of %d bytes is too large to forward to the writer (NATS max payload %d bytes)",
					r.Command.Kind(), len(data), n.o.Conn.MaxPayload())}}, true, nil
		case errors.Is(err, nats.ErrNoResponders):
			retry = true // nobody received it
		default:
			inDoubt = true
			retry = r.CommandID != ""
		}
		if !retry || ctx.Err() != nil {
			return commands.Reply{}, true, fmt.Errorf("%w: %v", ErrNoWriter, err)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return commands.Reply{}, true, fmt.Errorf("%w: %v", ErrNoWriter, ctx.Err())
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

// waitCopied waits until this node's engine holds position pos: a client
// that sent a command through a follower then reads its own write there.
func (n *Node) waitCopied(ctx context.Context, pos uint64) error {
	for {
		ch := n.eng.Changed()
		if n.eng.Head() >= pos {
			return nil
		}
		select {
		case <-ch:
		case <-n.failed:
			return fmt.Errorf("%w: the writer committed position %d, not copied here: %v", ErrStopped, pos, n.Err())
		case <-ctx.Done():
			return fmt.Errorf("%w: the writer committed position %d, not yet copied here: %w", ErrNoWriter, pos, ctx.Err())
		}
	}
}
