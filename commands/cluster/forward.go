package cluster

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
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
// ErrNoWriter, in doubt, as a crash of a single crewd would leave it, and
// so its one attempt waits for the writer's answer as long as ctx lasts
// (request).
//
// The answer comes once this node's copy holds the command's events and
// everything the writer had published when it answered (decidedOnHeader),
// so a client reads its own writes on the crewd it talks to, and the state
// a refusal was decided on.
//
// The request carries its credential, its bind position (Since) included,
// which the writer checks against the state it decides on: this node's
// copy, which its broker checked, may lag the stream by any amount. The
// writer's refusal of an ended credential is answered as one crewd answers
// it (a *commands.CredentialEndedError), once this node's copy holds the
// end too.
func (n *Node) Forward(ctx context.Context, r commands.Request) (commands.Reply, bool, error) {
	if n.writer.Load() {
		return commands.Reply{}, false, nil
	}
	// NB: this crewd's own disk, before anything is sent, as one crewd checks its disk before deciding: below its
	// minimum its clients hear disk-full, not a command the writer, with room, decided. Its copy still takes every
	// group the writer commits, which it cannot refuse.
	if err := n.eng.CheckSpace(); err != nil {
		return commands.Reply{}, true, err
	}
	data, err := commands.EncodeRequest(r)
	if err != nil {
		return commands.Reply{}, true, err
	}
	cred, err := credentialHeaderOf(r.Credential)
	if err != nil {
		return commands.Reply{}, true, err
	}
	since := sinceHeaderOf(r.Credential)
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
	unanswered := 0 // attempts that reached a node and went unanswered (maxUnansweredAttempts)
	for {
		if n.writer.Load() {
			return commands.Reply{}, false, nil // became the writer meanwhile
		}
		select {
		case <-n.failed:
			// NB: nothing more is sent once the node failed (its owner may answer reads a while before it restarts
			// it): its copy has stopped, so it would answer the writer's decision ErrStopped, in doubt, and a
			// command without a command id sent again by its client would be decided twice.
			return commands.Reply{}, true, fmt.Errorf("%w: nothing more was sent: %v", ErrStopped, n.Err())
		default:
		}
		m, err := n.request(ctx, data, cred, since, r.CommandID != "")
		var rep commands.Reply
		retry := false
		switch {
		case err == nil:
			rep, err = commands.DecodeReply(m.Data)
			if err == nil {
				if answerBeforeCopied && delegation(r) {
					return rep, true, nil
				}
				return rep, true, n.waitCopied(ctx, max(rep.Position, decidedOn(m)))
			}
			var ended *commands.CredentialEndedError
			if errors.As(err, &ended) {
				// The writer checked the request's credential against the
				// state it decides on, and it had ended, whatever this
				// node's copy still says: nothing was decided, and the
				// client hears so as from one crewd, once this node's copy
				// holds the end (decidedOnHeader), so that the credential
				// the client was told had ended admits nothing more here
				// (a hello, a read). NB: not after an attempt in doubt —
				// the writer checks the credential before it looks the
				// command id up, so a command decided then is refused
				// now, and every attempt after it would be: it is in
				// doubt at once.
				if inDoubt {
					return commands.Reply{}, true, fmt.Errorf("%w: %v", ErrNoWriter, err)
				}
				if err := n.waitCopied(ctx, decidedOn(m)); err != nil {
					return commands.Reply{}, true, err
				}
				return commands.Reply{}, true, ended
			}
			if commands.DecidedNothing(err) && !inDoubt {
				// The writer's disk is short, the result would not fit
				// the client's frame, or the command's cold run could not
				// be read back from the writer's log: it recorded nothing,
				// and the client hears so (disk-full, oversize-frame,
				// replay-failed), as from one crewd. NB: not after an
				// attempt in doubt — the writer checks its space, and the
				// credential's run, before it looks the command id up,
				// and answers a result too large without a commit, so a
				// command decided then (and still landing) would be
				// answered so.
				return commands.Reply{}, true, err
			}
			// The node asked was not the writer, or the writer held as many forwarded requests as it may (serve's
			// forwardSlots): it decided nothing, and the request is sent again after a pause, as a request waits
			// for room in the queue of one crewd.
			untaken := errors.Is(err, commands.ErrNotWriter) || errors.Is(err, commands.ErrWriterBusy)
			inDoubt = inDoubt || !untaken
			retry = untaken || r.CommandID != ""
		case errors.Is(err, nats.ErrMaxPayload) && !inDoubt:
			// Nothing was sent: the request is larger than a NATS
			// message. Refused, recording nothing, as the writer
			// refuses a command whose event no message can carry.
			return commands.Reply{Rejected: &commands.RejectedError{Code: commands.CodeBadParams,
				Reason: "invalid-params", Message: fmt.Sprintf("%s: a request of %d bytes (with its credential) "+
					"does not fit one NATS message to the writer: the NATS servers' max_payload is %d bytes; raise "+
					"max_payload above crewd's --max-frame, or send less", r.Command.Kind(),
					len(data)+len(cred)+len(since), n.o.Conn.MaxPayload())}}, true, nil
		case errors.Is(err, nats.ErrNoResponders):
			retry = true // nobody received it
			if n.o.unreceived != nil {
				n.o.unreceived()
			}
		default:
			inDoubt = true
			unanswered++
			retry = r.CommandID != "" && unanswered < maxUnansweredAttempts
			if !retry && ctx.Err() == nil && unanswered > 1 {
				err = fmt.Errorf("%d attempts unanswered: %w", unanswered, err)
			}
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

// credentialHeader is the header of a forwarded request's message that carries its credential (credentialHeaderOf):
// beside the request's bytes, which a writer of the build before forwarded credentials reads alone (commands'
// forward.go says why).
const credentialHeader = "Crewlog-Credential"

// credentialSinceHeader is the header of a forwarded request's message that carries its credential's bind position
// (commands.Credential.Since, sinceHeaderOf), when it has one: a header of its own, not a field of
// credentialHeader's value, which a writer of the build before this header decodes strictly (commands' forward.go)
// and would refuse with one more field. That writer reads no header it does not know, and decides the request as it
// did, the position unchecked; a writer of this build reads a request without the header, a follower's of that
// build, as a credential with no position, unchecked so too.
const credentialSinceHeader = "Crewlog-Credential-Since"

// defaultAttemptTimeout bounds the wait for the answer to one attempt of a request that may be sent again.
const defaultAttemptTimeout = 5 * time.Second

// maxUnansweredAttempts bounds the attempts of a request with a command id that go unanswered (a writer that died,
// or one slow to answer): the follower then answers ErrNoWriter, however long its caller's deadline, and the client
// sends it again with the same command id. Three are ForwardTimeout's 15 s at defaultAttemptTimeout.
//
// NB: each attempt sent to a slow writer waits there, a goroutine and the request's bytes, until it is decided
// (once: the ones after the first are answered as it) or the writer's own bound ends it; a caller with a long
// deadline made the follower send one every attempt bound until then. An attempt that reached no writer (no
// responder, a node that is not the writer) does not count: it waits for the next writer.
const maxUnansweredAttempts = 3

// request sends data, with its credential cred (credentialHeaderOf, "" for none) and the credential's bind position
// since (sinceHeaderOf, "" for none), on the commands subject and waits for one answer: Options.attemptTimeout
// (defaultAttemptTimeout) at most when resendable (the request has a command id), else as long as ctx lasts.
//
// NB: a request without a command id is not sent again once it may have reached a writer, so an attempt given up
// early would only answer in doubt what the writer still decides and answers: a writer's publish may wait out a
// stream leader election, up to its publish timeout, and is answered then.
func (n *Node) request(ctx context.Context, data []byte, cred, since string, resendable bool) (*nats.Msg, error) {
	m := nats.NewMsg(n.o.Log.CommandSubject())
	m.Data = data
	if cred != "" {
		m.Header.Set(credentialHeader, cred)
	}
	if since != "" {
		m.Header.Set(credentialSinceHeader, since)
	}
	if resendable {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.o.attemptTimeout)
		defer cancel()
	}
	return n.o.Conn.RequestMsgWithContext(ctx, m)
}

// decidedOnHeader is the header of a writer's answer that carries the position its engine had published when it
// answered, in decimal: at least that of the state it decided the request on, which a refusal, or a command that
// wrote nothing, does not name in its Reply.Position, nor does the refusal of a credential that ended (an error). A
// writer of the build before sends none, and its answer is awaited by Reply.Position alone, as that build's
// followers await every answer.
const decidedOnHeader = "Crewlog-Decided-On"

// decidedOn is the position m's decidedOnHeader names, 0 when it names none.
func decidedOn(m *nats.Msg) uint64 {
	pos, err := strconv.ParseUint(m.Header.Get(decidedOnHeader), 10, 64)
	if err != nil {
		return 0
	}
	return pos
}

// waitCopied waits until this node's engine holds position pos: a client
// that sent a command through a follower then reads its own write there,
// and the state the writer's refusal of it was decided on.
func (n *Node) waitCopied(ctx context.Context, pos uint64) error {
	for waited := false; ; waited = true {
		ch := n.eng.Changed()
		if n.eng.Head() >= pos {
			return nil
		}
		if !waited && n.o.beforeCopyWait != nil {
			n.o.beforeCopyWait(pos)
		}
		select {
		case <-ch:
		case <-n.failed:
			return fmt.Errorf("%w: the writer committed position %d, not copied here: %v", ErrStopped, pos, n.Err())
		case <-ctx.Done():
			return fmt.Errorf("%w: the writer committed position %d, not yet copied here: %w", ErrNoWriter,
				pos, ctx.Err())
		}
	}
}

// credentialHeaderOf is the value of a forwarded request's credential header: the unpadded URL-safe base64 of
// commands.EncodeCredential's bytes, a header's value whatever the credential's strings hold ("" for none).
func credentialHeaderOf(c *commands.Credential) (string, error) {
	b, err := commands.EncodeCredential(c)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// credentialOfHeader is the inverse of credentialHeaderOf; "" is no credential. A value that does not decode is
// an error, never read as no credential, which would decide the request unchecked.
func credentialOfHeader(h string) (*commands.Credential, error) {
	if len(h) > base64.RawURLEncoding.EncodedLen(commands.MaxCredentialBytes) {
		return nil, fmt.Errorf("cluster: a credential header of %d bytes", len(h))
	}
	b, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		return nil, fmt.Errorf("cluster: decode the credential header: %w", err)
	}
	return commands.DecodeCredential(b)
}

// sinceHeaderOf is the value of a forwarded request's credentialSinceHeader: the credential's bind position in
// decimal, "" when it has none (0) or there is no credential.
func sinceHeaderOf(c *commands.Credential) string {
	if c == nil || c.Since == 0 {
		return ""
	}
	return strconv.FormatUint(c.Since, 10)
}

// credentialOfHeaders is the credential h carries (credentialHeader, and credentialSinceHeader's bind position):
// nil for none. Anything that does not read back as what a follower sends is an error, the request refused with
// nothing decided, never read as no credential or no position, which would decide it less checked than it was sent:
// a position that is not exactly one positive decimal uint64 of no sign, leading zero or space, or a position
// without a credential.
func credentialOfHeaders(h nats.Header) (*commands.Credential, error) {
	c, err := credentialOfHeader(h.Get(credentialHeader))
	if err != nil {
		return nil, err
	}
	since := h.Values(credentialSinceHeader)
	switch {
	case len(since) == 0:
		return c, nil
	case c == nil:
		return nil, errors.New("cluster: a credential's bind position without a credential")
	case len(since) != 1:
		return nil, fmt.Errorf("cluster: %d bind positions of a credential", len(since))
	}
	pos, err := strconv.ParseUint(since[0], 10, 64)
	if err != nil || pos == 0 || strconv.FormatUint(pos, 10) != since[0] {
		return nil, fmt.Errorf("cluster: a credential's bind position %.24q is no positive decimal", since[0])
	}
	c.Since = pos
	return c, nil
}
