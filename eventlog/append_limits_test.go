package eventlog

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAppendLimitsHoldAtTheirBounds: every length a writer controls is accepted at its limit and refused one byte
// past it (ErrInvalid, nothing appended), so that a limit moved by one either way fails here: the stream, the type,
// each id and actor field of an event, its payload, and a write's command id, principal and fingerprint.
func TestAppendLimitsHoldAtTheirBounds(t *testing.T) {
	event := func(set func(e *Event, s string), n int) Write {
		e := ev("run", "t")
		set(&e, strings.Repeat("x", n))
		return Write{Events: []Event{e}}
	}
	cases := []struct {
		name  string
		limit int
		write func(n int) Write
	}{
		{"stream", MaxStreamLen, func(n int) Write { return event(func(e *Event, s string) { e.Stream = s }, n) }},
		{"type", MaxTypeLen, func(n int) Write { return event(func(e *Event, s string) { e.Type = s }, n) }},
		{"causation id", MaxIDLen, func(n int) Write { return event(func(e *Event, s string) { e.CausationID = s }, n) }},
		{"correlation id", MaxIDLen,
			func(n int) Write { return event(func(e *Event, s string) { e.CorrelationID = s }, n) }},
		{"actor role", MaxIDLen, func(n int) Write { return event(func(e *Event, s string) { e.ActorRole = s }, n) }},
		{"actor task", MaxIDLen, func(n int) Write { return event(func(e *Event, s string) { e.ActorTask = s }, n) }},
		{"payload", DefaultMaxPayloadBytes,
			func(n int) Write { return event(func(e *Event, s string) { e.Payload = []byte(s) }, n) }},
		{"command id", MaxIDLen, func(n int) Write {
			return Write{CommandID: strings.Repeat("c", n), Events: evs("run", 1)}
		}},
		{"principal", MaxPrincipalLen, func(n int) Write {
			return Write{Principal: strings.Repeat("p", n), CommandID: "c", Events: evs("run", 1)}
		}},
		{"fingerprint", MaxFingerprintLen, func(n int) Write {
			return Write{CommandID: "c", Fingerprint: make([]byte, n), Events: evs("run", 1)}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, _ := openMem(t)
			defer l.Close()
			_, err := l.Append(c.write(c.limit + 1))
			require.ErrorIs(t, err, ErrInvalid, "one byte past the limit of %d", c.limit)
			head, _ := l.Head()
			require.Zero(t, head, "a refused append appends nothing")

			first, err := l.Append(c.write(c.limit))
			require.NoError(t, err, "at the limit of %d", c.limit)
			require.EqualValues(t, 1, first)
		})
	}
}
