package commands

import (
	"fmt"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// forwardedSettle is a DelegateSettle as a follower forwards it: its fields as msgpack encodes the settle (an uncut
// one is the bytes a build before SentText sent), and, for a settle whose text its follower cut, SentRest, what of
// the text as sent follows Text, the cut.
//
// NB: not the text as sent whole beside its cut, which took its bytes in the NATS message twice: a settle that fit
// one message (the servers' max_payload above --max-frame) was refused once cut, where a settlement is cut rather
// than refused so that its run can finish. A writer of the build before skips SentRest, a field it does not know,
// and decides the cut text, as it decided a settle its follower cut.
type forwardedSettle struct {
	RunID       string
	SubID       string
	Outcome     string
	Text        string
	UsageTokens *int64
	SentRest    string `msgpack:",omitempty"`
}

// encodeForwardedSettle encodes c as forwardedSettle. A SentText that Text is no prefix of is refused: it is not
// the cut of its text (fitResult's), and the writer would decide another settle than the one given.
func encodeForwardedSettle(c *DelegateSettle) ([]byte, error) {
	f := forwardedSettle{RunID: c.RunID, SubID: c.SubID, Outcome: c.Outcome, Text: c.Text, UsageTokens: c.UsageTokens}
	if c.SentText != "" {
		rest, ok := strings.CutPrefix(c.SentText, c.Text)
		if !ok || rest == "" {
			return nil, fmt.Errorf("commands: encode delegate.settle: its text is no cut of the text as sent")
		}
		f.SentRest = rest
	}
	return msgpack.Marshal(&f)
}

// decodeForwardedSettle decodes b, encodeForwardedSettle's, into c: Text, a settle's cut, shares the text as sent,
// SentText, so that a cut settle holds its text once.
func decodeForwardedSettle(b []byte, c *DelegateSettle) error {
	var f forwardedSettle
	if err := msgpack.Unmarshal(b, &f); err != nil {
		return err
	}
	*c = DelegateSettle{RunID: f.RunID, SubID: f.SubID, Outcome: f.Outcome, Text: f.Text, UsageTokens: f.UsageTokens}
	if f.SentRest != "" {
		c.SentText = f.Text + f.SentRest
		c.Text = c.SentText[:len(f.Text)]
	}
	return nil
}
