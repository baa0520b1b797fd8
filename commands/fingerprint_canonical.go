package commands

import (
	m "github.com/crewlog/crewlog/events/msgpackappend"
)

// The canonical encodings of the two commands every delegation sends
// (delegate.request and delegate.settle), written field by field: exactly
// the bytes msgpack's reflection encoder writes for them (a struct as a map
// of its field names in declaration order, nil pointers as nil), which
// fingerprint digests. A fingerprint is stored with every outcome and
// compared with a retry's, possibly by a later build, so these must never
// differ from reflection by a byte: TestCanonicalEncodingMatchesReflection
// and FuzzCanonicalEncodingMatchesReflection hold them to it, and
// TestCanonicalEncodingCoversEveryField fails when a field is added.
//
// NB: DelegateSettle.SentText is no field of the request: it is the text its client sent, which the settle's
// encoding holds in Text's place, so a settle is fingerprinted as sent however a frame cut its text, and as before
// SentText when it was not cut (SentText empty; reflection never encodes it, msgpack:"-").

// appendCanonical appends c's canonical encoding; ok is false for a command
// that has no encoder here (reflection encodes it).
func appendCanonical(b []byte, c Command) (_ []byte, ok bool) {
	switch c := c.(type) {
	case *DelegateRequest:
		return c.appendCanonical(b), true
	case *DelegateSettle:
		return c.appendCanonical(b), true
	}
	return b, false
}

func (c *DelegateRequest) appendCanonical(b []byte) []byte {
	b = m.MapLen(b, 10)
	b = m.String(m.String(b, "RunID"), c.RunID)
	b = m.String(m.String(b, "TaskID"), c.TaskID)
	b = m.String(m.String(b, "Prompt"), c.Prompt)
	b = appendOptionalString(m.String(b, "Description"), c.Description)
	b = appendOptionalString(m.String(b, "Role"), c.Role)
	b = appendOptionalString(m.String(b, "Model"), c.Model)
	if b = m.String(b, "MaxTurns"); c.MaxTurns == nil {
		b = m.Nil(b)
	} else {
		b = m.Int(b, int64(*c.MaxTurns))
	}
	b = appendOptionalInt64(m.String(b, "BudgetTokens"), c.BudgetTokens)
	if b = m.String(b, "TimeoutSec"); c.TimeoutSec == nil {
		b = m.Nil(b)
	} else {
		b = m.Float64(b, *c.TimeoutSec)
	}
	return m.Bool(m.String(b, "Untrusted"), c.Untrusted)
}

func (c *DelegateSettle) appendCanonical(b []byte) []byte {
	b = m.MapLen(b, 5)
	b = m.String(m.String(b, "RunID"), c.RunID)
	b = m.String(m.String(b, "SubID"), c.SubID)
	b = m.String(m.String(b, "Outcome"), c.Outcome)
	b = m.String(m.String(b, "Text"), c.sentText())
	return appendOptionalInt64(m.String(b, "UsageTokens"), c.UsageTokens)
}

// sentText is the text as the client sent it.
func (c *DelegateSettle) sentText() string {
	if c.SentText != "" {
		return c.SentText
	}
	return c.Text
}

func appendOptionalString(b []byte, s *string) []byte {
	if s == nil {
		return m.Nil(b)
	}
	return m.String(b, *s)
}

func appendOptionalInt64(b []byte, n *int64) []byte {
	if n == nil {
		return m.Nil(b)
	}
	return m.Int64(b, *n)
}
