package commands

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/events/msgpacklen"
	"github.com/crewlog/crewlog/projections"
)

// commandKinds makes an empty command of each kind: the decoder of
// forwarded requests. A kind missing here cannot be forwarded;
// TestEveryCommandKindForwards reads the package's Kind methods and fails
// on any kind this map lacks.
var commandKinds = map[string]func() Command{
	"wait.request":        func() Command { return new(WaitRequest) },
	"wait.resolve":        func() Command { return new(WaitResolve) },
	"ask.expire":          func() Command { return new(AskExpire) },
	"credential.issue":    func() Command { return new(CredentialIssue) },
	"credential.revoke":   func() Command { return new(CredentialRevoke) },
	"delegate.spawned":    func() Command { return new(DelegateSpawned) },
	"delegate.settle":     func() Command { return new(DelegateSettle) },
	"delegate.cancel":     func() Command { return new(DelegateCancel) },
	"delegate.expire":     func() Command { return new(DelegateExpire) },
	"delegate.request":    func() Command { return new(DelegateRequest) },
	"engine.configure":    func() Command { return new(Configure) },
	"msg.send":            func() Command { return new(MessageSend) },
	"escalate":            func() Command { return new(Escalate) },
	"mailbox.deliver":     func() Command { return new(MailboxDeliver) },
	"mailbox.ack":         func() Command { return new(MailboxAck) },
	"quota.check":         func() Command { return new(QuotaRecheck) },
	"run.create":          func() Command { return new(RunCreate) },
	"run.transition":      func() Command { return new(RunTransition) },
	"steer.push":          func() Command { return new(SteerPush) },
	"task.create":         func() Command { return new(TaskCreate) },
	"task.transition":     func() Command { return new(TaskTransition) },
	"task.usage":          func() Command { return new(TaskUsage) },
	"job.create":          func() Command { return new(JobCreate) },
	"job.transition":      func() Command { return new(JobTransition) },
	"job.disconnect":      func() Command { return new(JobDisconnect) },
	"job.roots_reset":     func() Command { return new(JobRootsReset) },
	"lease.open":          func() Command { return new(LeaseOpen) },
	"lease.clear":         func() Command { return new(LeaseClear) },
	"manifest.revalidate": func() Command { return new(ManifestRevalidate) },
	"proxy.request":       func() Command { return new(ProxyRequest) },
	"proxy.complete":      func() Command { return new(ProxyComplete) },
	"proxy.cancel":        func() Command { return new(ProxyCancel) },
	"import.append":       func() Command { return new(Import) },
}

// forwarded is a Request on the wire between crewds of one cluster.
type forwarded struct {
	Principal events.Principal
	CommandID string
	Actor     events.Actor
	Kind      string
	Command   msgpack.RawMessage
}

// A forwarded request's Request.MaxResultBytes, the follower's own room for
// the answer, follows the array as one more msgpack value, when there is a
// bound (> 0): a writer of a build before the bound reads the array and
// ignores what follows (msgpack.Unmarshal reads one value), deciding the
// request without a bound as that build would, and this build decides a
// request of a follower of that build, which sends the array alone,
// without one. Either may be upgraded first.
func appendBound(b []byte, maxResultBytes int) ([]byte, error) {
	if maxResultBytes <= 0 {
		return b, nil
	}
	n, err := msgpack.Marshal(maxResultBytes)
	if err != nil {
		return nil, fmt.Errorf("commands: encode the bound of a forwarded request: %w", err)
	}
	return append(b, n...), nil
}

// EncodeRequest encodes r for another engine of the same build (a
// follower forwarding to the writer). Its Credential is not in these bytes:
// it travels beside them (EncodeCredential).
func EncodeRequest(r Request) ([]byte, error) {
	var (
		c   []byte
		err error
	)
	if s, ok := r.Command.(*DelegateSettle); ok {
		c, err = encodeForwardedSettle(s)
	} else {
		c, err = msgpack.Marshal(r.Command)
	}
	if err != nil {
		return nil, fmt.Errorf("commands: encode %s: %w", r.Command.Kind(), err)
	}
	b, err := marshalArray(&forwarded{Principal: r.Principal, CommandID: r.CommandID, Actor: r.Actor,
		Kind: r.Command.Kind(), Command: c})
	if err != nil {
		return nil, err
	}
	return appendBound(b, r.MaxResultBytes)
}

// errLengths refuses forwarded bytes that declare a length they do not hold.
var errLengths = errors.New("a declared length runs past the end")

// DecodeRequest is the inverse of EncodeRequest.
func DecodeRequest(b []byte) (Request, error) {
	// NB: before reflection, which would size a byte field by its declared length: a reply or request of a few
	// bytes could otherwise ask for gigabytes (events.LengthsFit). The same pass finds where the array ends.
	end, st := msgpacklen.Skip(b, 0, 1)
	switch st {
	case msgpacklen.Short:
		return Request{}, fmt.Errorf("commands: decode forwarded request: %w", errLengths)
	case msgpacklen.Unknown:
		end = len(b) // for msgpack to refuse
	}
	var f forwarded
	if err := msgpack.Unmarshal(b[:end], &f); err != nil {
		return Request{}, fmt.Errorf("commands: decode forwarded request: %w", err)
	}
	bound, err := decodeBound(b[end:])
	if err != nil {
		return Request{}, err
	}
	mk, ok := commandKinds[f.Kind]
	if !ok {
		return Request{}, fmt.Errorf("commands: forwarded request of unknown kind %q", f.Kind)
	}
	c := mk()
	if s, ok := c.(*DelegateSettle); ok {
		err = decodeForwardedSettle(f.Command, s)
	} else {
		err = msgpack.Unmarshal(f.Command, c)
	}
	if err != nil {
		return Request{}, fmt.Errorf("commands: decode forwarded %s: %w", f.Kind, err)
	}
	return Request{Principal: f.Principal, CommandID: f.CommandID, Actor: f.Actor, Command: c,
		MaxResultBytes: bound}, nil
}

// decodeBound reads what follows a forwarded request's array: nothing (no
// bound), or one positive int, appendBound's.
func decodeBound(rest []byte) (int, error) {
	if len(rest) == 0 {
		return 0, nil
	}
	var bound int
	end, st := msgpacklen.Skip(rest, 0, 1)
	if st != msgpacklen.OK || end != len(rest) {
		return 0, fmt.Errorf("commands: decode forwarded request: %d bytes after its bound", len(rest)-end)
	}
	if err := msgpack.Unmarshal(rest, &bound); err != nil || bound <= 0 {
		return 0, fmt.Errorf("commands: decode forwarded request: a bound that is no positive int (%v)", err)
	}
	return bound, nil
}

// A forwarded request's Credential (its digest, never the secret) travels beside the request's bytes (cluster's
// forward.go puts it in a header of the message that carries them), so that the writer checks it against the state
// it decides the request on, as it checks a local one.
//
// NB: beside the bytes, not in them. A writer of the build before forwarded credentials decodes the request's array
// strictly (msgpack refuses an array-encoded struct of another length) and refuses any value after its bound, so no
// form of the bytes could carry the credential to it; it reads the bytes alone. So a follower of this build sends
// every request so, and a writer of the build before decides it as it decided every forwarded request, without the
// check; a writer of this build decides a request of a follower of the build before, which sends no credential, as
// that build did. In a rolling upgrade a forwarded request is checked once its follower and the writer both run
// this build, and no answer of any node makes a follower of this build drop the credential.

// EncodeCredential encodes c to travel beside a forwarded request: the msgpack array of its four strings, and a
// fifth, its Attempt in decimal, when that is not 0. nil is no bytes. NB: four as before Attempt, so a writer of the
// build before reads every credential of a task never retried; one that was, it refuses to decode (nothing decided),
// rather than check it without its attempt. Four strings read as attempt 0, so a follower of the build before has a
// retried task's worker refused as the ended attempt's (stale-token) by a writer of this build until it is upgraded.
// Since is not in these bytes either (a writer of the build before would refuse every worker's request): it travels
// in a header of its own (cluster's forward.go), which that writer does not read, deciding as it did before Since a
// command whose run ended and was reopened between the follower's broker's check and the decision, and which a
// writer of this build checks as one crewd does.
func EncodeCredential(c *Credential) ([]byte, error) {
	if c == nil {
		return nil, nil
	}
	fields := []string{c.RunID, c.Key, c.Digest, c.TaskID}
	if c.Attempt != 0 {
		fields = append(fields, strconv.Itoa(c.Attempt))
	}
	b, err := msgpack.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("commands: encode the credential of a forwarded request: %w", err)
	}
	return b, nil
}

// MaxCredentialBytes bounds what DecodeCredential reads: four strings of at most a few hundred bytes each (a run
// id, a task id, a key and a digest) fit in it many times over.
const MaxCredentialBytes = 8 << 10

// DecodeCredential is the inverse of EncodeCredential; no bytes is no credential.
func DecodeCredential(b []byte) (*Credential, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) > MaxCredentialBytes {
		return nil, fmt.Errorf("commands: decode the credential of a forwarded request: %d bytes", len(b))
	}
	if end, st := msgpacklen.Skip(b, 0, 1); st != msgpacklen.OK || end != len(b) {
		return nil, errors.New("commands: decode the credential of a forwarded request: not one msgpack value")
	}
	var fields []string
	if err := msgpack.Unmarshal(b, &fields); err != nil || len(fields) != 4 && len(fields) != 5 {
		return nil, fmt.Errorf("commands: decode the credential of a forwarded request: no array of four or five "+
			"strings (%v)", err)
	}
	c := &Credential{RunID: fields[0], Key: fields[1], Digest: fields[2], TaskID: fields[3]}
	if len(fields) == 5 {
		n, err := strconv.Atoi(fields[4])
		if err != nil || n <= 0 || strconv.Itoa(n) != fields[4] {
			return nil, fmt.Errorf("commands: decode the credential of a forwarded request: attempt %q is no "+
				"positive integer", fields[4])
		}
		c.Attempt = n
	}
	return c, nil
}

// forwardedReply is a Reply (or the error of Submit) on the wire.
type forwardedReply struct {
	Result   []byte
	Rejected *RejectedError
	Position uint64
	Replayed bool
	Err      string
	Cause    replyCause
}

// replyCause names, beside an error's text, the errors a forwarder must
// tell apart: those given before anything was decided. Any other error,
// and a cause this build does not know, is a failure of the writer, in
// doubt.
type replyCause uint8

const (
	causeFailed         replyCause = iota
	causeNoSpace                   // ErrNoSpace: the client is owed disk-full, as from one crewd
	causeNotWriter                 // ErrNotWriter: the request may go to the writer again
	causeResultTooLarge            // ErrResultTooLarge: nothing was recorded; the client is owed oversize-frame
	// A *CredentialEndedError, one cause for each end: nothing was decided; the client is owed the answer of one
	// crewd to a credential that has ended (the broker's revoked, or stale-token for a task or run that ended). A
	// follower of the build before forwarded credentials, which knows none of these, sends no credential, and so is
	// never answered one.
	causeCredentialRevoked
	causeCredentialRunEnded
	causeCredentialTaskEnded
	// projections.ErrNotReadBack: a cold run the writer could not read back from its log; it decided and recorded
	// nothing, and the client is owed replay-failed, as from one crewd.
	causeNotReadBack
	// ErrWriterBusy: the writer took no more forwarded requests; nothing was decided and the request may go to it
	// again. A follower of the build before, which knows no such cause, takes it for the writer's failure, in doubt:
	// it sends a request with a command id again, and answers one without unavailable.
	causeWriterBusy
)

// credentialCause is the cause of the refusal of a credential that ended so; an end this build does not know is
// told as a revocation, as CredentialEndedError's reason tells it.
func credentialCause(end CredentialEnd) replyCause {
	switch end {
	case CredentialRunEnded:
		return causeCredentialRunEnded
	case CredentialTaskEnded:
		return causeCredentialTaskEnded
	}
	return causeCredentialRevoked
}

// credentialEndOf is the end of a credential that cause tells of, if it tells of one.
func credentialEndOf(cause replyCause) (CredentialEnd, bool) {
	switch cause {
	case causeCredentialRevoked:
		return CredentialRevoked, true
	case causeCredentialRunEnded:
		return CredentialRunEnded, true
	case causeCredentialTaskEnded:
		return CredentialTaskEnded, true
	}
	return CredentialLive, false
}

// DecidedNothing reports whether err is a writer's refusal of a request it decided and recorded nothing for, and
// that its client is owed as itself (disk-full, oversize-frame, replay-failed), as one crewd answers it: the errors
// EncodeReply carries by their cause besides ErrNotWriter and a *CredentialEndedError.
func DecidedNothing(err error) bool {
	switch causeOf(err) {
	case causeNoSpace, causeResultTooLarge, causeNotReadBack:
		return true
	}
	return false
}

// causeOf is the cause err travels with in a forwarded reply (EncodeReply): causeFailed for any other error.
func causeOf(err error) replyCause {
	switch {
	case errors.Is(err, ErrNoSpace):
		return causeNoSpace
	case errors.Is(err, ErrNotWriter):
		return causeNotWriter
	case errors.Is(err, ErrResultTooLarge):
		return causeResultTooLarge
	case errors.Is(err, projections.ErrNotReadBack):
		return causeNotReadBack
	case errors.Is(err, ErrWriterBusy):
		return causeWriterBusy
	}
	if ended, ok := err.(*CredentialEndedError); ok {
		return credentialCause(ended.End)
	}
	return causeFailed
}

// EncodeReply encodes the answer of Submit for the engine that forwarded
// the request. An error travels as its text and, for ErrNoSpace,
// ErrNotWriter, ErrWriterBusy, ErrResultTooLarge, projections.ErrNotReadBack
// and a *CredentialEndedError, its cause:
// the forwarder cannot match the text with errors.Is, and must not match
// it by its words — an engine's failure quotes the commit error that
// stopped it, whose words may be those of an answer given before deciding
// while the failed groups may be durable. NB: a *CredentialEndedError is
// told by its type alone, as the broker tells it, not found in a chain: an
// error that wraps one says more than that nothing was decided.
func EncodeReply(r Reply, err error) ([]byte, error) {
	f := forwardedReply{Result: r.Result, Rejected: r.Rejected, Position: r.Position, Replayed: r.Replayed}
	if err != nil {
		f.Err, f.Cause = err.Error(), causeOf(err)
	}
	return marshalArray(&f)
}

// marshalArray encodes structs as arrays: positions, not field names.
func marshalArray(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseArrayEncodedStructs(true)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("commands: encode: %w", err)
	}
	return buf.Bytes(), nil
}

// DecodeReply is the inverse of EncodeReply; a remote error comes back
// wrapping ErrRemote, but the writer's ErrNoSpace, ErrNotWriter, ErrWriterBusy,
// ErrResultTooLarge and projections.ErrNotReadBack as themselves, and its
// *CredentialEndedError as one, not wrapped: the broker tells it by its
// type, and the client of a follower must hear what one crewd would answer.
func DecodeReply(b []byte) (Reply, error) {
	if !events.LengthsFit(b) { // NB: as in DecodeRequest
		return Reply{}, fmt.Errorf("commands: decode forwarded reply: %w", errLengths)
	}
	var f forwardedReply
	if err := msgpack.Unmarshal(b, &f); err != nil {
		return Reply{}, fmt.Errorf("commands: decode forwarded reply: %w", err)
	}
	switch end, credentialEnded := credentialEndOf(f.Cause); {
	case f.Err == "":
	case credentialEnded:
		return Reply{}, &CredentialEndedError{End: end}
	case f.Cause == causeNoSpace:
		return Reply{}, fmt.Errorf("%w%s (on the writer)", ErrNoSpace, strings.TrimPrefix(f.Err, ErrNoSpace.Error()))
	case f.Cause == causeNotWriter:
		return Reply{}, fmt.Errorf("%w (answered by the node asked)", ErrNotWriter)
	case f.Cause == causeResultTooLarge:
		return Reply{}, fmt.Errorf("%w%s (on the writer)", ErrResultTooLarge,
			strings.TrimPrefix(f.Err, ErrResultTooLarge.Error()))
	case f.Cause == causeNotReadBack:
		return Reply{}, fmt.Errorf("%w (on the writer: %s)", projections.ErrNotReadBack, f.Err)
	case f.Cause == causeWriterBusy:
		return Reply{}, fmt.Errorf("%w (answered by the writer)", ErrWriterBusy)
	default:
		return Reply{}, fmt.Errorf("%w: %s", ErrRemote, f.Err)
	}
	r := Reply{Rejected: f.Rejected, Position: f.Position, Replayed: f.Replayed}
	if f.Result != nil {
		r.Result = json.RawMessage(f.Result)
	}
	return r, nil
}
