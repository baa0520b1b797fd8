package natslog

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events/msgpacklen"
)

// A group is published as one JetStream atomic batch (nats-server ≥ 2.12,
// ADR-50): every message carries Nats-Batch-Id and Nats-Batch-Sequence
// (1..n), the last one Nats-Batch-Commit: 1, and the server stores all n or
// none. Its messages, in order:
//
//  1. the manifest, on crewlog.<Stream>.groups: the batch id, the position
//     the group follows, how many messages the batch has, and every
//     write's outcome (principal, command id, code, reason, result,
//     fingerprint, expectations) with its number of events. A write that
//     recorded an outcome and no events is only here. The manifest carries
//     the fence, Nats-Expected-Last-Sequence (JetStream checks it, for
//     the first message only, when the batch commits).
//  2. its events, on crewlog.<Stream>.events.<token> (subject.go), in
//     position order; consecutive events of one crewlog stream share a
//     message (a chunk) up to a byte budget, each message carrying the
//     batch id and its index.
//
// A one-message batch (a group that wrote no events) is a plain publish:
// one message is atomic without a batch.
//
// Batch headers are kept in the stored messages by the server, but a copy
// does not rely on them: the batch id and index in every payload let it
// reassemble a group and detect a partial or foreign one (copy.go).
//
// The manifest of a batch that follows another of its writer's carries
// that batch's id in Crewlog-Prev-Batch: a copy takes a batch whose
// previous batch is not the last one it took as void (copy.go, stage.go).
// A header rather than a field of the manifest, so that crewds that do not
// know it still read the stream (a rolling upgrade); a manifest without
// it (the first batch of a stream, one written before it) is never void.
const (
	headerBatchID     = "Nats-Batch-Id"
	headerBatchSeq    = "Nats-Batch-Sequence"
	headerBatchCommit = "Nats-Batch-Commit"
	headerPrevBatch   = "Crewlog-Prev-Batch"
)

// DefaultMaxBatchMessages is nats-server's default limit on the messages of
// one atomic batch (jetstream { limits { max_batch_size } }).
const DefaultMaxBatchMessages = 1000

// ErrGroupTooLarge is returned by Commit for a group holding one command
// whose writes need more messages than one batch may have: nothing is
// published.
var ErrGroupTooLarge = fmt.Errorf("%w: natslog: a command's events need more messages than one atomic batch may hold",
	eventlog.ErrInvalid)

// wireManifest is a batch's first message.
type wireManifest struct {
	Batch    string // the batch id, also in every chunk
	After    uint64 // the writer's head before the batch
	Messages int    // of the batch, this one included
	Writes   []wireWriteHead
}

// wireWriteHead is a write's outcome (its Events empty) and how many of
// the batch's events, in order, are its.
type wireWriteHead struct {
	Outcome wireWrite
	Events  int
}

// wireChunk is one of a batch's messages after the manifest: consecutive
// events of the crewlog stream its subject names.
type wireChunk struct {
	Batch  string
	Index  int         // 2..Messages
	Stream string      // the crewlog stream, which the subject must name
	Events []wireEvent // without their stream
}

// batchLimits bound one batch.
type batchLimits struct {
	messages int // messages per batch
	bytes    int // a chunk's (and the manifest's) estimated payload
}

// packer follows the messages a batch needs as writes are added, by the one
// rule that both planBatches and encodeBatch use: an event joins the last
// chunk when it is of the same crewlog stream and the chunk stays within
// the byte budget, and opens a new chunk otherwise.
type packer struct {
	lim      batchLimits
	messages int // manifest included
	manifest int // estimated bytes
	stream   string
	chunk    int // estimated bytes of the last chunk, 0 before the first
}

func newPacker(lim batchLimits) packer { return packer{lim: lim, messages: 1, manifest: 64} }

// joins reports whether e goes into the last chunk, and adds it.
func (p *packer) add(e *eventlog.Event) (joins bool) {
	n := eventBytes(e)
	if p.chunk > 0 && e.Stream == p.stream && p.chunk+n <= p.lim.bytes {
		p.chunk += n
		return true
	}
	p.messages++
	p.stream, p.chunk = e.Stream, 64+n
	return false
}

func (p *packer) addWrite(w *eventlog.Write) {
	p.manifest += writeHeadBytes(w)
	for i := range w.Events {
		p.add(&w.Events[i])
	}
}

func (p *packer) fits() bool { return p.messages <= p.lim.messages && p.manifest <= p.lim.bytes }

// fitsWith reports whether the batch would still fit its limits with e added (p itself is left as it is).
func (p packer) fitsWith(e *eventlog.Event) bool {
	p.add(e)
	return p.fits()
}

func eventBytes(e *eventlog.Event) int {
	return 32 + len(e.Type) + len(e.CausationID) + len(e.CorrelationID) + len(e.ActorRole) + len(e.ActorTask) +
		len(e.Payload)
}

func writeHeadBytes(w *eventlog.Write) int {
	n := 32 + len(w.Principal) + len(w.CommandID) + len(w.Code) + len(w.Reason) + len(w.Result) + len(w.Fingerprint)
	for _, x := range w.Expected {
		n += 16 + len(x.Stream)
	}
	return n
}

// planBatches cuts a group into batches, in order, at command boundaries:
// each batch holds as many whole writes as fit its limits. A group that
// fits is one batch (the usual case: the engine's group of up to MaxGroup
// commands, one chunk per run it touches); a larger one is several, each
// atomic, committed one after the other. Every prefix of a group at a
// command boundary is a log the writer could have committed (it decided
// the commands in that order), so a group cut short by a failure between
// its batches leaves a valid log, as a crash between two groups would.
// A write that does not fit a batch on its own is refused: ErrGroupTooLarge.
func planBatches(ws []eventlog.Write, lim batchLimits) ([][]eventlog.Write, error) {
	var out [][]eventlog.Write
	start := 0
	p := newPacker(lim)
	for i := range ws {
		try := p
		try.addWrite(&ws[i])
		if try.fits() {
			p = try
			continue
		}
		alone := newPacker(lim)
		alone.addWrite(&ws[i])
		if !alone.fits() {
			return nil, fmt.Errorf("%w (command %q: %d messages, manifest of %d bytes; limits %d messages, %d bytes)",
				ErrGroupTooLarge, ws[i].CommandID, alone.messages, alone.manifest, lim.messages, lim.bytes)
		}
		out = append(out, ws[start:i])
		start, p = i, alone
	}
	return append(out, ws[start:]), nil
}

// chunkRoom bounds what a message of a batch holds besides one event's
// eventBytes and its crewlog stream's name: the layout's byte, the batch
// id and index, msgpack's headers, and the batch's NATS headers, which
// count against the server's maximum payload too.
const chunkRoom = 1 << 10

// CheckWrite refuses a write that no batch can carry, so that the engine
// refuses its command before deciding on it (commands.WriteChecker)
// instead of failing stop when its publish fails: a write that needs more
// messages than one batch may hold, or whose outcome (its code, reason and
// result) is larger than a batch's manifest may be (ErrGroupTooLarge), or
// an event of which is too large for one message of the server's. All wrap
// eventlog.ErrInvalid, and each names the limit it met and what to change.
func (l *Log) CheckWrite(w *eventlog.Write) error {
	lim := l.limits()
	p := newPacker(lim)
	p.addWrite(w)
	mp := int(l.js.Conn().MaxPayload())
	switch {
	case p.messages > lim.messages:
		return limitError{ErrGroupTooLarge, fmt.Sprintf("natslog: a command's events need %d messages, more than one "+
			"atomic batch may hold (%d: the NATS servers' max_batch_size, crewd's --nats-max-batch); raise both, or send "+
			"less", p.messages, lim.messages)}
	case p.manifest > lim.bytes && lim.bytes < maxManifestBytes:
		return limitError{ErrGroupTooLarge, fmt.Sprintf("natslog: a command's outcome of about %d bytes does not fit "+
			"a batch's manifest, which may hold %d bytes, half of one NATS message: the NATS servers' max_payload is %d "+
			"bytes; raise max_payload above crewd's --max-frame, or send less", p.manifest, lim.bytes, mp)}
	case p.manifest > lim.bytes:
		return limitError{ErrGroupTooLarge, fmt.Sprintf("natslog: a command's outcome of about %d bytes does not fit "+
			"a batch's manifest, which may hold %d bytes; send less", p.manifest, lim.bytes)}
	}
	if mp > 0 {
		for i := range w.Events {
			e := &w.Events[i]
			if n := eventBytes(e) + len(e.Stream) + chunkRoom; n > mp {
				return limitError{eventlog.ErrInvalid, fmt.Sprintf("natslog: an event of about %d bytes (with its "+
					"message's envelope) does not fit one NATS message: the NATS servers' max_payload is %d bytes; raise "+
					"max_payload above crewd's --max-frame, or send less", n, mp)}
			}
		}
	}
	return nil
}

// limitError is CheckWrite's refusal of a write the log would take but no batch of NATS messages carries: is (which
// wraps eventlog.ErrInvalid), with a text that names the servers' limit and what to change instead of an invalid
// append — the operator's setting, not the client's request, is what falls short.
type limitError struct {
	is   error
	text string
}

func (e limitError) Error() string { return e.text }

func (e limitError) Unwrap() error { return e.is }

// encodeBatch encodes ws (one batch of planBatches, before Append assigns
// anything in place) as the messages of batch id following batch prev and
// position after, with the fence (the expected last sequence of the whole
// stream) on the first.
func encodeBatch(c Config, lim batchLimits, id, prev string, after, expectLast uint64,
	ws []eventlog.Write) ([]*nats.Msg, error) {
	m := wireManifest{Batch: id, After: after, Writes: make([]wireWriteHead, len(ws))}
	var chunks []wireChunk
	var subjects []string
	var sizes []int // each chunk's estimated bytes, for its buffer
	p := newPacker(lim)
	for i := range ws {
		w := &ws[i]
		m.Writes[i] = wireWriteHead{Outcome: outcomeToWire(w), Events: len(w.Events)}
		p.manifest += writeHeadBytes(w)
		for j := range w.Events {
			e := &w.Events[j]
			if !p.add(e) {
				chunks = append(chunks, wireChunk{Batch: id, Index: len(chunks) + 2, Stream: e.Stream})
				subjects = append(subjects, c.EventSubject(e.Stream))
				sizes = append(sizes, 0)
			}
			k := &chunks[len(chunks)-1]
			k.Events = append(k.Events, toWire(e, false))
			sizes[len(sizes)-1] = p.chunk
		}
	}
	m.Messages = 1 + len(chunks)
	msgs := make([]*nats.Msg, 0, m.Messages)
	data, err := encodeWire(&m, p.manifest)
	if err != nil {
		return nil, err
	}
	msgs = append(msgs, &nats.Msg{Subject: c.Subject(), Data: data, Header: nats.Header{}})
	for i := range chunks {
		data, err := encodeWire(&chunks[i], sizes[i])
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, &nats.Msg{Subject: subjects[i], Data: data, Header: nats.Header{}})
	}
	first := msgs[0].Header
	first.Set(jetstream.ExpectedStreamHeader, c.Stream)
	first.Set(jetstream.ExpectedLastSeqHeader, strconv.FormatUint(expectLast, 10))
	if prev != "" {
		first.Set(headerPrevBatch, prev)
	}
	if len(msgs) > 1 {
		for i, msg := range msgs {
			msg.Header.Set(headerBatchID, id)
			msg.Header.Set(headerBatchSeq, strconv.Itoa(i+1))
		}
		msgs[len(msgs)-1].Header.Set(headerBatchCommit, "1")
	}
	return msgs, nil
}

// encodeWire encodes v after the layout's byte into a buffer of size, the
// packer's estimate of its bytes: NB a buffer grown from nothing copied
// every message about twice over, and was a tenth of the writer's
// allocations.
func encodeWire(v any, size int) ([]byte, error) {
	buf := bytes.NewBuffer(append(make([]byte, 0, size), batchVersion))
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(buf)
	enc.UseArrayEncodedStructs(true) // positions, not field names: sent once per copy
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("natslog: encode batch: %w", err)
	}
	return buf.Bytes(), nil
}

var errNotBatch = errors.New("natslog: message is not of the batch layout")

// errLengths refuses a message that declares a length it does not hold.
var errLengths = errors.New("natslog: a declared length runs past the end of the message")

func decodeWire(b []byte, v any) error {
	if len(b) == 0 || b[0] != batchVersion {
		return fmt.Errorf("%w: %w", eventlog.ErrCorrupt, errNotBatch)
	}
	// NB: before reflection, which makes a slice of structs at its declared
	// length: a message of a few bytes declaring 2^32 writes or events would
	// otherwise ask for terabytes, a fatal error no recover catches.
	if !msgpacklen.Fit(b[1:]) {
		return fmt.Errorf("%w: %w", eventlog.ErrCorrupt, errLengths)
	}
	if err := msgpack.Unmarshal(b[1:], v); err != nil {
		return fmt.Errorf("%w: natslog: decode batch message: %v", eventlog.ErrCorrupt, err)
	}
	return nil
}
