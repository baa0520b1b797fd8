package bench

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestReadBackRefusesThinnerPayloads: every field the workload writes is
// read back, so a store that kept a smaller payload than crewlog writes (the
// admission without its policy, a result without its delivery mode) fails
// the pre-check and the timed re-check instead of being timed doing less.
func TestReadBackRefusesThinnerPayloads(t *testing.T) {
	st := &runState{Granted: 1 << 20, Slots: 4}
	sub := newSubID()
	admitted := decisionEvents(st, sub, "", 1000, 1_700_000_000_000)
	rejected := decisionEvents(st, sub, ReasonSlots, 1000, 1_700_000_000_000)
	settled, err := settleEvents(sub, "ok")
	require.NoError(t, err)
	// round trips p through the stored encoding, as a store reads it back.
	roundTrip := func(typ string, p any) any {
		b, err := events.EncodePayload(p)
		require.NoError(t, err)
		out, err := events.DecodePayload(typ, events.SchemaVersion(typ), b)
		require.NoError(t, err)
		return out
	}
	for _, e := range [][]event{admitted, rejected, settled} {
		for _, ev := range e {
			_, bad := checkPayload(ev.Type, roundTrip(ev.Type, ev.Payload))
			require.Empty(t, bad, "%s as the workload writes it", ev.Type)
		}
	}
	for _, tc := range []struct {
		name  string
		typ   string
		thin  func() any
		wrong string
	}{
		{"admission without its policy", events.TypeDelegateAdmitted, func() any {
			a := *admitted[1].Payload.(*events.DelegateAdmitted)
			a.Policy = nil
			return &a
		}, "policy"},
		{"admission without model, title, cwd or deadline", events.TypeDelegateAdmitted, func() any {
			a := *admitted[1].Payload.(*events.DelegateAdmitted)
			a.Model, a.Title, a.Cwd, a.Deadline, a.TimeoutSec, a.ParentRole = "", "", "", 0, 0, ""
			return &a
		}, "model, title, cwd, parent role or deadline"},
		{"rejection without its policy or message", events.TypeDelegateRejected, func() any {
			r := *rejected[1].Payload.(*events.DelegateRejected)
			r.Policy, r.Message = nil, ""
			return &r
		}, "message or policy"},
		{"reservation without the grant", events.TypeBudgetReserved, func() any {
			r := *admitted[2].Payload.(*events.BudgetReserved)
			r.GrantedTokens = 0
			return &r
		}, "task or tokens"},
		{"result without priority or delivery mode", events.TypeMailboxAppended, func() any {
			m := *settled[0].Payload.(*events.MailboxAppended)
			m.Priority, m.DeliveryMode = "", ""
			return &m
		}, "addressing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, bad := checkPayload(tc.typ, roundTrip(tc.typ, tc.thin()))
			require.Contains(t, bad, tc.wrong)
		})
	}
}

// TestTimedRecheckRefusesALostOrDuplicatedOperation: the state read back
// after a timed cell must hold exactly the operations the clients finished,
// whole, so a store that lost or duplicated one — or any event of one — is
// refused rather than timed.
func TestTimedRecheckRefusesALostOrDuplicatedOperation(t *testing.T) {
	const ops = 4
	st := &runState{Granted: timedBudget, Slots: timedSlots}
	var all [][]event // per operation: its decision's events, then its settlement's
	for range ops {
		sub := newSubID()
		evs := decisionEvents(st, sub, "", timedTokens, 1_700_000_000_000)
		st.admit(sub, timedTokens)
		settled, err := settleEvents(sub, "ok")
		require.NoError(t, err)
		all = append(all, append(evs, settled...))
	}
	fold := func(evs []event) map[string]Final {
		f := newFinals()
		for _, e := range evs {
			f.add("run-0", e.Type, e.Payload)
		}
		return f.result()
	}
	without := func(op, i int) []event { // every event but operation op's i-th
		var out []event
		for o, evs := range all {
			for j, e := range evs {
				if o != op || j != i {
					out = append(out, e)
				}
			}
		}
		return out
	}
	whole := func(n int) []event {
		var out []event
		for _, evs := range all[:n] {
			out = append(out, evs...)
		}
		return out
	}
	require.Empty(t, checkTimed(fold(whole(ops)), []string{"run-0"}, ops), "every operation, whole")
	for _, tc := range []struct {
		name string
		evs  []event
	}{
		{"an operation lost", whole(ops - 1)},
		{"an operation written twice", append(whole(ops), all[1]...)},
		{"an operation lost and another written twice", append(whole(ops-1), all[1]...)},
		{"a decision's request lost", without(2, 0)},
		{"a decision's admission lost", without(2, 1)},
		{"a decision's reservation lost", without(2, 2)},
		{"a settlement's result lost", without(2, 3)},
		{"a settlement's terminal event lost", without(2, 4)},
		{"a settlement written twice", append(whole(ops), all[3][3:]...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NotEmpty(t, checkTimed(fold(tc.evs), []string{"run-0"}, ops))
		})
	}
}
