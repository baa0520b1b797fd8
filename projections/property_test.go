package projections

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// Model test: for random histories, the state folded incrementally (with
// clones and queries in between), the state folded from scratch and the
// state decoded from a mid-history snapshot then folded over the tail are
// all equal, and the fold's invariants hold. The credentials the histories
// leave name who issued and revoked them and why, so that the comparisons
// cover those fields too (a snapshot that lost them would fail them), and
// so do the events and bytes each worker appended (Task.ActorEvents,
// ActorBytes), when tasks waited for a slot (Task.SlotWaitAt) and whose
// share of the slots each delegation counts for (Delegation.ShareHolder).
func TestFoldProperties(t *testing.T) {
	var issuedBy, revokedBy, reasons, workerEvents, workerBytes, slotWaits, delegatorShares int
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 42))
		evs := randomHistory(rng, 50+rng.IntN(400))
		s := checkFoldProperties(t, rng, seed, evs, rng.IntN(len(evs)+1))
		for _, r := range s.runs {
			for _, c := range r.creds {
				if c.IssuedBy != "" {
					issuedBy++
				}
				if c.RevokedBy != "" {
					revokedBy++
				}
				if c.RevokedReason != "" {
					reasons++
				}
			}
			for _, task := range r.tasks {
				if task.ActorEvents > 0 {
					workerEvents++
				}
				if task.ActorBytes > 0 {
					workerBytes++
				}
				if task.SlotWaitAt > 0 {
					slotWaits++
				}
			}
			for _, d := range r.dels {
				if d.ShareHolder != d.ParentTaskID {
					delegatorShares++
				}
			}
		}
	}
	require.Positive(t, workerEvents, "no task counted the events its worker appended")
	require.Positive(t, workerBytes, "no task counted the bytes its worker appended")
	require.Positive(t, slotWaits, "no task waited for a slot")
	require.Positive(t, delegatorShares, "no delegation's slot counted for its delegating worker's share")
	require.Positive(t, issuedBy, "no credential recorded who issued it")
	require.Positive(t, revokedBy, "no credential recorded who revoked it")
	require.Positive(t, reasons, "no credential recorded why it was revoked")
}

// TestFoldPropertiesOfALongRun holds one run of more messages than a few
// chunks of its message log to the same properties, so that a fold, a
// clone, a snapshot and its decoding cross chunk boundaries, and holds the
// snapshot encoder to reflection's bytes on that state and its clone.
func TestFoldPropertiesOfALongRun(t *testing.T) {
	evs := longRunHistory(7_000)
	s := fold(evs)
	require.Len(t, s.runs, 1)
	for _, r := range s.runs {
		require.Greater(t, r.msgs.Len(), 2*messageChunk+messageChunk/8, "three chunks, the last well begun")
	}
	for seed, k := range []int{len(evs) / 2, len(evs) / 3, len(evs) - 1} {
		checkFoldProperties(t, rand.New(rand.NewPCG(uint64(seed), 7)), uint64(seed), evs, k)
	}
	for _, st := range []*State{s, s.Clone()} {
		got, err := EncodeSnapshot(st)
		require.NoError(t, err)
		require.Equal(t, encodeSnapshotByReflection(t, st), got)
	}
}

// checkFoldProperties checks TestFoldProperties' properties on evs, with
// clones and queries drawn from rng and the snapshot taken after k events,
// and returns the state folded from scratch.
func checkFoldProperties(t *testing.T, rng *rand.Rand, seed uint64, evs []events.Event, k int) *State {
	t.Helper()
	scratch := fold(evs)
	checkInvariants(t, scratch)

	inc := New()
	for _, ev := range evs {
		Apply(inc, ev)
		if rng.IntN(50) == 0 {
			inc = inc.Clone()
		}
		if rng.IntN(20) == 0 {
			queryAll(t, inc)
		}
	}
	require.Equal(t, scratch, inc, "seed %d: incremental fold", seed)

	mid := fold(evs[:k])
	b, err := EncodeSnapshot(mid)
	require.NoError(t, err)
	restored, records, err := decodeSnapshot(b)
	require.NoError(t, err)
	require.Equal(t, mid, restored, "seed %d: snapshot at %d", seed, k)
	require.Equal(t, mid.SnapshotRecords(), records, "seed %d: the decoder counts the snapshot's records", seed)
	again, err := EncodeSnapshot(restored)
	require.NoError(t, err)
	require.Equal(t, b, again, "seed %d: snapshot encoding is deterministic", seed)
	for _, ev := range evs[k:] {
		Apply(restored, ev)
	}
	require.Equal(t, scratch, restored, "seed %d: snapshot at %d + tail", seed, k)
	return scratch
}

// queryAll runs every query; queries must not change the state.
func queryAll(t *testing.T, s *State) {
	before := s.Clone()
	page, err := s.Runs(RunFilter{Limit: 2})
	require.NoError(t, err)
	for _, r := range page.Runs {
		s.Run(r.RunID)
		s.Tasks(r.RunID)
		s.Delegations(r.RunID)
		s.Ledger(r.RunID)
		s.Asks(r.RunID)
		s.Credentials(r.RunID)
		_, err := s.Mailbox(r.RunID, "", MailboxFilter{Pending: true, Limit: 1})
		require.NoError(t, err)
	}
	s.Slots()
	s.InFlight()
	s.Config()
	require.Equal(t, before, s)
}
