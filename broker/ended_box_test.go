package broker

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// endedRecord is a record of ev's type and payload, at its current schema version.
func endedRecord(t testing.TB, typ string, payload any) *eventlog.Event {
	b, err := events.EncodePayload(payload)
	require.NoError(t, err)
	return &eventlog.Event{Position: 9, Stream: runR, Type: typ, SchemaVersion: events.SchemaVersion(typ), Payload: b}
}

// TestEndedBoxReadsItsIDWithoutAllocating: the feed learns which box a settlement, a task's end or a credential's
// change ends by reading the one id out of the record, where it decoded the whole payload for it: two allocations
// of each, with a decoder that had seen its strings before (more with one that had not: a settlement's subId).
func TestEndedBoxReadsItsIDWithoutAllocating(t *testing.T) {
	for _, tc := range []struct {
		ev   *eventlog.Event
		want string
	}{
		{endedRecord(t, events.TypeDelegateCompleted,
			&events.DelegateCompleted{TaskID: taskP, SubID: "gc-3f9c", OK: true, MessageID: "msg_1"}), "gc-3f9c"},
		{endedRecord(t, events.TypeDelegateTimedOut, &events.DelegateTimedOut{TaskID: taskP, SubID: "gc-4", Expired: true}),
			"gc-4"},
		{endedRecord(t, events.TypeTaskCompleted, &events.TaskCompleted{TaskID: "01_work"}), "01_work"},
		{endedRecord(t, events.TypeCredentialRevoked, &events.CredentialRevoked{TaskID: "01_work", Digest: "ab"}),
			"01_work"},
		{endedRecord(t, events.TypeCredentialIssued,
			&events.CredentialIssued{TaskID: events.OrchestratorKey, Role: events.RoleOrchestrator, Digest: "cd"}),
			events.RunInbox},
	} {
		t.Run(tc.ev.Type, func(t *testing.T) {
			dec := events.NewDecoder()
			box, narrowed := endedBox(dec, tc.ev)
			require.True(t, narrowed)
			require.Equal(t, tc.want, box)
			require.Zero(t, testing.AllocsPerRun(100, func() { box, narrowed = endedBox(dec, tc.ev) }))
		})
	}
}

// TestEndedBoxAgreesWithTheDecode: for every event that ends credentials, on random payloads, the box read out of the
// record is the box of the payload decoded whole; a record neither reads names no box.
func TestEndedBoxAgreesWithTheDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 2))
	dec := events.NewDecoder()
	seen := 0
	for _, typ := range events.Types() {
		if !endsCredentials(typ) {
			continue
		}
		seen++
		for range 200 {
			p := events.NewPayload(typ)
			fillRandom(r, reflect.ValueOf(p).Elem(), 0)
			if f := reflect.ValueOf(p).Elem().FieldByName("TaskID"); f.IsValid() && r.IntN(8) == 0 {
				f.SetString(events.OrchestratorKey)
			}
			ev := endedRecord(t, typ, p)
			wantBox, wantNarrowed := decodedEndedBox(dec, ev)
			box, narrowed := endedBox(dec, ev)
			require.Equal(t, wantNarrowed, narrowed, "%s %x", typ, ev.Payload)
			require.Equal(t, wantBox, box, "%s %x", typ, ev.Payload)
			require.Equal(t, !runEnds(typ), narrowed, typ)

			ev.Payload = ev.Payload[:len(ev.Payload)-1]
			box, narrowed = endedBox(dec, ev)
			require.False(t, narrowed, "%s cut short %x", typ, ev.Payload)
			require.Empty(t, box)
		}
	}
	require.Equal(t, 15, seen)
}
