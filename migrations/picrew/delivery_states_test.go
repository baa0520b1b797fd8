package picrew

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events/jsonstring/jsonref"
)

// TestADeliveryFileOfManyStatesIsReadInLittleMemory: a run's workers write delivery.json, up to maxWholeFile bytes,
// and the one-shot import and the follower (at every rewrite) decode it; the follower keeps the states of a live run.
// A file of hundreds of thousands of states held each state's bytes apart, the map of them and the map decoded from
// it at once (4 MiB took 39 to 68 MB of heap), and the follower kept every state while the run was live, though
// pi-crew keeps at most 10,000. The states are decoded one at a time now, and maxDeliveryStates of them kept, the
// others left out and reported (TestADeliveryFileOfTooManyStatesKeepsTheMostAdvanced says which).
func TestADeliveryFileOfManyStatesIsReadInLittleMemory(t *testing.T) {
	const size = 4 << 20
	for name, state := range map[string]string{"states": `"acknowledged"`, "not strings": `{"s":1}`,
		"numbers": `1`} {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString(`{"messages":{`)
			n := 0
			for ; b.Len() < size; n++ {
				if n > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, `"m%07d":%s`, n, state)
			}
			b.WriteString(`},"updatedAt":"2026-10-02T08:00:00.000Z"}`)
			file := []byte(b.String())
			s := &source{root: t.TempDir()}
			var states map[string]string
			var ok bool
			peak := peakHeapDuring(func() { states, _, ok = s.parseDelivery(runA, "delivery.json", file, nil) })
			t.Logf("%d states of %s: %d bytes of heap at most", n, state, peak)
			require.True(t, ok)
			require.Less(t, peak, uint64(2*size), "the heap held %d bytes", peak)
			require.Equal(t, fmt.Sprintf("holds the states of more than %d messages (pi-crew keeps at most 10,000): "+
				"%[1]d are kept, those of the run's messages first, then of other ids, the most advanced of each "+
				"(acknowledged, then delivered, then the others, each in the order named), the others left out, "+
				"their states taken from their mailbox lines", maxDeliveryStates),
				s.skipped[0].Reason)
			if state != `"acknowledged"` {
				require.Empty(t, states)
				require.Len(t, s.skipped, maxReportsPerFile+1, "reports bounded")
				require.Equal(t, "message m0000000: its delivery state is not a string: left out, its state taken "+
					"from its mailbox line", s.skipped[1].Reason)
				return
			}
			require.Len(t, s.skipped, 1)
			require.Len(t, states, maxDeliveryStates)
			require.Equal(t, "acknowledged", states[fmt.Sprintf("m%07d", maxDeliveryStates-1)])
		})
	}
}

// parseDeliveryReference is what parseDelivery replaced: every state of delivery.json b decoded at once as raw
// bytes, each then decoded alone, in the order of the message ids.
func parseDeliveryReference(s *source, id, rel string, b []byte) (states map[string]string, ok bool) {
	var d struct {
		Messages map[string]json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		s.skip(id, rel, 0, 0, deliveryUnreadable, err)
		return nil, false
	}
	states = make(map[string]string, len(d.Messages))
	for _, msgID := range slices.Sorted(maps.Keys(d.Messages)) {
		var st string
		if err := json.Unmarshal(d.Messages[msgID], &st); err != nil {
			s.skip(id, rel, 0, 0,
				"message %s: its delivery state is not a string: left out, its state taken from its mailbox line",
				clip(msgID))
			continue
		}
		states[msgID] = st
	}
	return states, true
}

// FuzzDeliveryStatesAgreeWithReference: parseDelivery decodes the states of delivery.json one at a time, where they
// were decoded at once as raw bytes and each then alone (parseDeliveryReference). For any bytes naming at most
// maxDeliveryStates messages, it keeps the same states and reports the same things in the same order: a file the
// reference refuses with its error, a state that is not a string by its id, the last of a message id named twice
// (in one messages member, or in several, whose states merge, a null one dropping those before it) standing.
func FuzzDeliveryStatesAgreeWithReference(f *testing.F) {
	for _, s := range []string{`{}`, `null`, ` { } `, `[]`, `5`, `"x"`, `{"messages":null}`, `{"messages":5}`,
		`{"messages":[1]}`, `{"messages":"x"}`, `{"messages":{}}x`, `{"messages":{"a":"b"`,
		`{"messages":{"a":"queued","b":1,"c":null,"a":{"x":1},"b":"acknowledged"}}`,
		`{"messages":{"a":"x"},"MESSAGES":{"b":"y"},"messages":null,"Messages":{"c":"z","d":[]}}`,
		`{"messages":{"a":"x"},"messages":5,"messages":{"b":"y"}}`,
		`{"messages":{"\ud800":"\udfff","a\u0000":"\"","é":true}}`, `{"meſſages":{"a":"b"}}`,
	} {
		f.Add([]byte(s))
	}
	addTestdataSeeds(f, "mailbox", "delivery.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		want, got := &source{root: "r"}, &source{root: "r"}
		wantStates, wantOK := parseDeliveryReference(want, runA, "delivery.json", b)
		gotStates, _, gotOK := got.parseDelivery(runA, "delivery.json", b, nil)
		require.Equal(t, wantOK, gotOK)
		require.Equal(t, wantStates, gotStates)
		require.Equal(t, comparableSkips(want.skipped), comparableSkips(got.skipped))
	})
}

// goValueOf is how encoding/json names what a value that does not fit was decoded into: a struct's field, or a
// value of a type.
var goValueOf = regexp.MustCompile(`into Go (struct field \S* of type|value of type)`)

// comparableSkips is skipped as the reference's reasons compare with parseDelivery's on this build: from Go 1.27
// (encoding/json on json/v2, jsonref.V2) a type error names the struct field of the whole file the reference
// decodes, and only the type of the member parseDelivery decodes alone, so there the two are compared without those
// words.
func comparableSkips(skipped []Skipped) []Skipped {
	if !jsonref.V2 {
		return skipped
	}
	out := slices.Clone(skipped)
	for i := range out {
		out[i].Reason = goValueOf.ReplaceAllString(out[i].Reason, "into Go value of type")
	}
	return out
}
