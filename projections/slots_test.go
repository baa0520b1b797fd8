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
// fold's last admission took it): such a snapshot is refused, and the state rebuilt from the log.
func TestSnapshotRefusesTwoRunsHoldingOneSubId(t *testing.T) {
	const other = "team_20261001000000_fedcba9876543210"
	h := &history{}
	fixture(h, 0, true)
	admitBatch(h, "gc-shared", 0, false, 0)
	h.add(other, events.TypeRunCreated, &events.RunCreated{Team: "default", Goal: "other"})
	h.add(other, events.TypeDelegateAdmitted, &events.DelegateAdmitted{TaskID: "t", SubID: "gc-shared", ChildDepth: 2,
		Role: "explorer", Unmetered: true})
	b, err := EncodeSnapshot(fold(h.evs))
	require.NoError(t, err)
	_, err = DecodeSnapshot(b)
	require.ErrorIs(t, err, ErrBadSnapshot)
	require.ErrorContains(t, err, "holds a slot another run holds")
}
