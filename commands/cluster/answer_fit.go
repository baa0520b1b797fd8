package cluster

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/crewlog/crewlog/commands"
)

// An answer of the writer's larger than one NATS message (the servers' max_payload) cannot be sent: a refusal
// recorded while max_payload was larger and answered again to a retry once it was lowered, or a failure whose text
// quotes what a peer sent. It is answered cut to fit (fitAnswer), its meaning kept and the limit named, rather than
// dropped: its follower would wait for it until its time was up, and answer that no writer answered — and its
// client's retry would meet the same answer again.

// errAnswerTooLarge is fitAnswer's refusal of an answer it cannot cut to fit: its follower waits for the answer in
// vain, as for one its connection lost (lostAnswer).
var errAnswerTooLarge = errors.New("cluster: the answer does not fit one NATS message, even cut")

// fitAnswer encodes rep and err, the answer to a forwarded request that encoded in size bytes, more than room, cut to
// fit room bytes: a refusal keeps its code and reason and a failure its cause (commands.EncodeReply), with their text
// cut and the servers' max_payload named; an accepted command's result, which cannot be cut, is answered as the
// writer's failure, naming the limit (in doubt: the command was decided).
func fitAnswer(rep commands.Reply, err error, size, room int, maxPayload int64) ([]byte, error) {
	note := fmt.Sprintf(" … (cut: the writer's answer of %d bytes does not fit one NATS message: the NATS "+
		"servers' max_payload is %d bytes; raise max_payload above crewd's --max-frame)", size, maxPayload)
	switch {
	case err != nil:
		return fitText(room, note, err.Error(), func(cut string) ([]byte, error) {
			return commands.EncodeReply(rep, cutError{err: err, text: cut})
		})
	case rep.Rejected != nil:
		rej := *rep.Rejected
		return fitText(room, note, rej.Message, func(cut string) ([]byte, error) {
			rej.Message = cut
			return commands.EncodeReply(commands.Reply{Rejected: &rej, Position: rep.Position,
				Replayed: rep.Replayed}, nil)
		})
	}
	failed := fmt.Errorf("cluster: the command was decided, and the writer's answer of %d bytes does not fit one "+
		"NATS message: the NATS servers' max_payload is %d bytes; raise max_payload above crewd's --max-frame, then "+
		"retry with the same command id", size, maxPayload)
	b, eerr := commands.EncodeReply(commands.Reply{}, failed)
	if eerr == nil && len(b) > room {
		eerr = errAnswerTooLarge
	}
	return b, eerr
}

// fitText encodes, with encode, text cut to fit room bytes with note after it: encode's answer without any text
// tells how many bytes the text may have.
func fitText(room int, note, text string, encode func(cut string) ([]byte, error)) ([]byte, error) {
	bare, err := encode("")
	if err != nil {
		return nil, err
	}
	// NB: msgpack spends up to 5 bytes on a string's length, where the bare answer spent 1 on an empty one.
	keep := room - len(bare) - 4 - len(note)
	if keep < 0 {
		return nil, errAnswerTooLarge
	}
	if len(text) > keep {
		for keep > 0 && !utf8.RuneStart(text[keep]) {
			keep--
		}
		text = text[:keep]
	}
	b, err := encode(text + note)
	if err == nil && len(b) > room {
		err = errAnswerTooLarge
	}
	return b, err
}

// cutError is err with its text cut to fit an answer (fitAnswer): it is still err for errors.Is, so its cause
// travels with it (commands.EncodeReply).
type cutError struct {
	err  error
	text string
}

func (e cutError) Error() string { return e.text }

func (e cutError) Unwrap() error { return e.err }

// headerBytes is about how many bytes h adds to a NATS message, which count against the servers' max_payload:
// "NATS/1.0\r\n", each "key: value\r\n", and the blank line that ends them.
func headerBytes(h nats.Header) int {
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": \r\n") + len(v)
		}
	}
	return n
}
