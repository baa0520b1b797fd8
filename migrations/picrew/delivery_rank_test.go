package picrew

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// deliveryFile is a delivery.json naming each of states in order, the message ids m0000000, m0000001, … unless a
// state is written "id=state" (state a JSON value).
func deliveryFile(states ...string) []byte {
	var b strings.Builder
	b.WriteString(`{"messages":{`)
	for i, st := range states {
		if i > 0 {
			b.WriteString(",")
		}
		id := fmt.Sprintf("m%07d", i)
		if named, value, ok := strings.Cut(st, "="); ok {
			id, st = named, value
		}
		fmt.Fprintf(&b, "%q:%s", id, st)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// repeated is n copies of state.
func repeated(n int, state string) []string {
	states := make([]string, n)
	for i := range states {
		states[i] = state
	}
	return states
}

// renamed is n states of msgID, acknowledged and queued by turns, the last queued.
func renamed(msgID string, n int) []string {
	states := make([]string, n)
	for i := range states {
		states[i] = msgID + "=" + []string{`"acknowledged"`, `"queued"`}[(n-i)%2]
	}
	return states
}

// TestADeliveryFileOfTooManyStatesKeepsTheMostAdvanced: of a delivery.json naming more than maxDeliveryStates
// messages, the first maxDeliveryStates ids in file order were kept, so an acknowledgement past them was dropped and
// its message read as its mailbox line says (queued), while a queued state kept cost nothing. The most advanced
// states are kept now (acknowledged, then delivered, then the others), the first in file order of each.
func TestADeliveryFileOfTooManyStatesKeepsTheMostAdvanced(t *testing.T) {
	const ack, del, queued = `"acknowledged"`, `"delivered"`, `"queued"`
	id := func(i int) string { return fmt.Sprintf("m%07d", i) }
	for _, tc := range []struct {
		name   string
		states []string
		kept   map[string]string // states of some ids kept
		left   []string          // ids left out
	}{{
		name:   "the last of 10,001 is acknowledged",
		states: append(repeated(maxDeliveryStates, queued), ack),
		kept:   map[string]string{id(maxDeliveryStates): "acknowledged", id(0): "queued"},
		left:   []string{id(maxDeliveryStates - 1)},
	}, {
		name:   "the last of 10,001 is delivered",
		states: append(repeated(maxDeliveryStates, queued), del),
		kept:   map[string]string{id(maxDeliveryStates): "delivered"},
		left:   []string{id(maxDeliveryStates - 1)},
	}, {
		name:   "a delivered state past 10,000 acknowledgements",
		states: append(repeated(maxDeliveryStates, ack), del),
		kept:   map[string]string{id(0): "acknowledged", id(maxDeliveryStates - 1): "acknowledged"},
		left:   []string{id(maxDeliveryStates)},
	}, {
		name: "acknowledgements after delivered states after queued ones",
		states: append(append(repeated(maxDeliveryStates, queued), repeated(maxDeliveryStates/2, del)...),
			repeated(maxDeliveryStates/2+1, ack)...),
		kept: map[string]string{id(maxDeliveryStates): "delivered", id(3*maxDeliveryStates/2 - 2): "delivered",
			id(3 * maxDeliveryStates / 2): "acknowledged", id(2 * maxDeliveryStates): "acknowledged"},
		left: []string{id(0), id(maxDeliveryStates - 1), id(3*maxDeliveryStates/2 - 1)},
	}, {
		name:   "one that is not a string goes before a queued state",
		states: append(append([]string{`{"s":1}`}, repeated(maxDeliveryStates-1, queued)...), queued, del),
		kept: map[string]string{id(1): "queued", id(maxDeliveryStates - 1): "queued",
			id(maxDeliveryStates + 1): "delivered"},
		left: []string{id(0), id(maxDeliveryStates)},
	}, {
		name:   "an id named again acknowledged past the bound",
		states: append(repeated(maxDeliveryStates, queued), "m0000005="+ack, ack),
		kept:   map[string]string{id(5): "acknowledged", id(maxDeliveryStates + 1): "acknowledged"},
		left:   []string{id(maxDeliveryStates - 1)},
	}, {
		name:   "an id named again queued past the bound goes first",
		states: append(repeated(maxDeliveryStates, ack), "m0000005="+queued, del),
		kept:   map[string]string{id(maxDeliveryStates - 1): "acknowledged", id(maxDeliveryStates + 1): "delivered"},
		left:   []string{id(5)},
	}, {
		name:   "an id named again and again is named last",
		states: append(append(repeated(maxDeliveryStates, queued), renamed("m0000005", 3*maxDeliveryStates)...), del),
		kept: map[string]string{id(0): "queued", id(maxDeliveryStates - 1): "queued",
			id(4 * maxDeliveryStates): "delivered"},
		left: []string{id(5)},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			file := deliveryFile(tc.states...)
			s := &source{root: t.TempDir()}
			states := requireKept(t, s, file, nil, tc.kept, tc.left)
			require.Contains(t, s.skipped[0].Reason, "holds the states of more than 10000 messages")
			again, _, _ := (&source{root: t.TempDir()}).parseDelivery(runA, "delivery.json", file, nil)
			require.Equal(t, states, again, "the same file keeps the same states")
		})
	}
}

// TestADeliveryFileNamingAnIdAgainAndAgainHoldsLittle: each naming of an id kept pushes it at its rank, where the
// entry of its naming before stays behind; a file naming one id hundreds of thousands of times (up to maxWholeFile
// bytes) held an entry for each. Those left behind are dropped once there are more than maxDeliveryStates of them.
func TestADeliveryFileNamingAnIdAgainAndAgainHoldsLittle(t *testing.T) {
	var d struct {
		Messages deliveryStates `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(deliveryFile(renamed("m", 20*maxDeliveryStates)...), &d))
	require.Equal(t, map[string]deliveryState{"m": {state: "queued", ok: true, named: 20 * maxDeliveryStates}},
		d.Messages.states)
	held := 0
	for _, ids := range d.Messages.byRank {
		held += len(ids)
	}
	require.LessOrEqual(t, held, maxDeliveryStates+1)
}

// TestDeliveryStatesOfTheRunsMessagesAreKeptFirst: of a delivery.json naming more than maxDeliveryStates messages,
// the states of the run's messages are kept before any other id's, whatever their states and wherever named; of
// each, the most advanced, the first named.
func TestDeliveryStatesOfTheRunsMessagesAreKeptFirst(t *testing.T) {
	const ack, del, queued = `"acknowledged"`, `"delivered"`, `"queued"`
	own := func(msgID string) bool { return strings.HasPrefix(msgID, "own") }
	junk := func(n int, state string) []string {
		states := make([]string, n)
		for i := range states {
			states[i] = fmt.Sprintf("junk%05d=%s", i, state)
		}
		return states
	}
	ownStates := []string{"own1=" + ack, "own2=" + del, "own3=" + queued, `own4="other"`}
	for _, tc := range []struct {
		name   string
		states []string
		kept   map[string]string
		left   []string
	}{{
		name:   "after 10,000 acknowledged other ids",
		states: append(junk(maxDeliveryStates, ack), ownStates...),
		kept: map[string]string{"own1": "acknowledged", "own2": "delivered", "own3": "queued", "own4": "other",
			"junk00000": "acknowledged", "junk09995": "acknowledged"},
		left: []string{"junk09996", "junk09999"},
	}, {
		name:   "before 10,000 acknowledged other ids",
		states: append(append([]string{}, ownStates...), junk(maxDeliveryStates, ack)...),
		kept:   map[string]string{"own1": "acknowledged", "own4": "other", "junk09995": "acknowledged"},
		left:   []string{"junk09996"},
	}, {
		name: "of the run's, one not a string left out",
		states: append(append(junk(maxDeliveryStates, ack), ownStates...),
			"own5="+ack, "own6="+queued, `own7=5`, "own8="+ack),
		kept: map[string]string{"own1": "acknowledged", "own2": "delivered", "own3": "queued", "own4": "other",
			"own5": "acknowledged", "own6": "queued", "own8": "acknowledged"},
		left: []string{"own7", "junk09993"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			requireKept(t, &source{root: t.TempDir()}, deliveryFile(tc.states...), own, tc.kept, tc.left)
		})
	}
}

// requireKept parses delivery.json file with s, the run's messages those message tells, and holds the states to
// maxDeliveryStates, kept among them, and none of left's ids.
func requireKept(t *testing.T, s *source, file []byte, message func(string) bool, kept map[string]string,
	left []string) map[string]string {
	t.Helper()
	states, _, ok := s.parseDelivery(runA, "delivery.json", file, message)
	require.True(t, ok)
	require.Equal(t, maxDeliveryStates, len(states))
	for msgID, st := range kept {
		require.Equal(t, st, states[msgID], "the state of %s", msgID)
	}
	for _, msgID := range left {
		require.NotContains(t, states, msgID)
	}
	return states
}
