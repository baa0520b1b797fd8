package projections

import (
	"testing"

	"github.com/crewlog/crewlog/events"
	"github.com/stretchr/testify/require"
)

// A subId holds a slot for one run at a time, but a settled delegation holds none: another run may admit the same
// subId afterwards (an import of another runtime's files chooses its own), and the snapshot of that state reads back
// whatever order its runs are decoded in. The run that holds the slot is created first here, so it is decoded first.
func TestSnapshotKeepsASettledSubIdAnotherRunHolds(t *testing.T) {
	const other = "team_20261001000000_fedcba9876543210"
	h := &history{}
	h.add(other, events.TypeRunCreated, &events.RunCreated{Team: "default", Goal: "other"})
	h.add(other, events.TypeRunRunning, &events.RunRunning{})
	fixture(h, 0, true)
	admitBatch(h, "gc-shared", 0, false, 0)
	settleBatch(h, "gc-shared", events.TypeDelegateCompleted, 0, 0)
	h.add(other, events.TypeDelegateAdmitted, &events.DelegateAdmitted{TaskID: "t", SubID: "gc-shared", ChildDepth: 2,
		Role: "explorer", Unmetered: true})
	s := fold(h.evs)
	holder, ok := s.SlotHolder("gc-shared")
	require.True(t, ok)
	require.Equal(t, other, holder)

	b, err := EncodeSnapshot(s)
	require.NoError(t, err)
	back, err := DecodeSnapshot(b)
	require.NoError(t, err, "a settled delegation holds no slot another run's could collide with")
	holder, ok = back.SlotHolder("gc-shared")
	require.True(t, ok)
	require.Equal(t, other, holder)
	require.Equal(t, s.Slots(), back.Slots())
}

// Two runs whose delegations hold a slot under one subId cannot both hold it (the pool is keyed by subId, and the
// fold ignores the second admission, TestAnAdmissionOfASubIDAnotherRunHoldsIsIgnored): a snapshot that lists them,
// damaged or written by a fold that took it, is refused, and the state rebuilt from the log.
func TestSnapshotRefusesTwoRunsHoldingOneSubId(t *testing.T) {
	const other = "team_20261001000000_fedcba9876543210"
	h := &history{}
	fixture(h, 0, true)
	admitBatch(h, "gc-shared", 0, false, 0)
	h.add(other, events.TypeRunCreated, &events.RunCreated{Team: "default", Goal: "other"})
	s := fold(h.evs)
	d := *s.runs[runR].dels["gc-shared"]
	d.RunID = other
	o := s.runs[other]
	o.dels[d.SubID], o.delOrder, o.inFlight = &d, append(o.delOrder, d.SubID), append(o.inFlight, d.SubID)
	b, err := EncodeSnapshot(s)
	require.NoError(t, err)
	_, err = DecodeSnapshot(b)
	require.ErrorIs(t, err, ErrBadSnapshot)
	require.ErrorContains(t, err, "holds a slot another run holds")
}

// The slot pool is keyed by subId, and a slot is one run's at a time: a delegate.admitted of a subId another run's
// delegation holds is ignored, as the snapshot's decoder refuses two runs holding one subId and as no decision
// records one (crewlog mints subIds from UUIDs, an import may not admit a held one). The fold took it: the slot
// moved to the second run, the first run's delegation stayed in flight holding none, and the second run's
// settlement freed the pool of it, which then admitted one delegation more than its capacity; the state's snapshot
// was refused at every start.
func TestAnAdmissionOfASubIDAnotherRunHoldsIsIgnored(t *testing.T) {
	const other = "team_20261001000000_fedcba9876543210"
	var h history
	fixture(&h, 0, true)
	admitBatch(&h, "gc-1", 0, false, 0)
	h.add(other, events.TypeRunCreated, &events.RunCreated{Team: "t", Workflow: "w", Goal: "g", Cwd: "/w"})
	h.add(other, events.TypeRunRunning, &events.RunRunning{})
	h.add(other, events.TypeTaskCreated, &events.TaskCreated{TaskID: taskP, Role: "executor", Agent: "a", Title: "T",
		Cwd: "/w"})
	h.add(other, events.TypeDelegateAdmitted, &events.DelegateAdmitted{TaskID: taskP, SubID: "gc-1", ChildDepth: 2,
		Role: "explorer", Unmetered: true, TimeoutSec: 900, Deadline: at(len(h.evs)+1) + 900_000, Cwd: "/w",
		Title: "d"})
	s := fold(h.evs)
	holder, ok := s.SlotHolder("gc-1")
	require.True(t, ok)
	require.Equal(t, runR, holder, "the slot stays the first run's")
	_, admitted := s.Delegation(other, "gc-1")
	require.False(t, admitted, "the second admission is ignored")
	require.False(t, s.IsShadow(other, "gc-1"), "with no shadow task")
	checkInvariants(t, s)
	b, err := EncodeSnapshot(s)
	require.NoError(t, err)
	_, err = DecodeSnapshot(b)
	require.NoError(t, err, "the snapshot is read")

	Apply(s, h.add(other, events.TypeDelegateCompleted, &events.DelegateCompleted{TaskID: taskP, SubID: "gc-1",
		OK: true}))
	require.Equal(t, 1, s.SlotsHeld(), "the other run's settlement frees nothing")
	d, ok := s.Delegation(runR, "gc-1")
	require.True(t, ok)
	require.Equal(t, DelegationQueued, d.Status)
	checkInvariants(t, s)
}
