package natslog

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// stage stages groups in order on w and returns their Waits' results, in
// order: every group is published before any is waited for.
func stage(t *testing.T, w *Log, groups ...[]eventlog.Write) []error {
	t.Helper()
	staged := make([]*Staged, len(groups))
	for i, g := range groups {
		s, err := w.Stage(g)
		require.NoError(t, err)
		staged[i] = s
	}
	errs := make([]error, len(staged))
	for i, s := range staged {
		_, errs[i] = s.Wait()
	}
	return errs
}

func streamMsgs(t *testing.T, l *Log) uint64 {
	t.Helper()
	st, err := l.stream.Info(context.Background())
	require.NoError(t, err)
	return st.State.Msgs
}

// Groups staged one after another before any is acknowledged commit in
// Stage order, each fenced behind the one before, and copy as groups
// committed one at a time do.
func TestStagedGroupsCommitInOrder(t *testing.T) {
	js := connect(t, startServer(t))
	w := openLog(t, js)
	for _, err := range stage(t, w, groupAcross("g1"), group1("g2"), groupAcross("g3")) {
		require.NoError(t, err)
	}
	require.Equal(t, uint64(2*groupAcrossMessages+2), w.Sequence())
	requireCopy(t, w.Local(), openLog(t, js).Local(), 9)
	_, err := w.Commit(group1("g4"))
	require.NoError(t, err)
	requireCopy(t, w.Local(), openLog(t, js).Local(), 10)
}

// A deposed writer's pipeline: another writer appended before its first
// staged group, so that group is fenced, and so is the one staged after
// it; neither is stored nor in the deposed writer's copy.
func TestDeposedWritersStagedGroupsAreRefused(t *testing.T) {
	js := connect(t, startServer(t))
	a, b := openLog(t, js), openLog(t, js)
	_, err := b.Commit(group1("from-b"))
	require.NoError(t, err)

	errs := stage(t, a, groupAcross("a1"), group1("a2"))
	require.ErrorIs(t, errs[0], ErrFenced)
	require.ErrorIs(t, errs[1], ErrFenced)
	head, _ := a.Local().Head()
	require.Zero(t, head, "nothing of the deposed writer is in its copy")
	require.Equal(t, uint64(2), streamMsgs(t, a), "the stream holds only the other writer's group")
}

// The fence of a staged group is a sequence, which another writer's group
// may reach by chance: a deposed writer's first group is fenced by another
// writer's group of the same size, and its second, fenced with the end of
// its first, matches the end of the other writer's and is stored. Its
// manifest names the batch it follows — the deposed writer's first, which is not in
// the stream — so every copy skips it, a copy that starts again after the
// last group it holds too; the writer it landed behind is fenced by it,
// catches up past it, and goes on.
func TestDeposedWritersBatchStoredByChanceIsVoid(t *testing.T) {
	js := connect(t, startServer(t))
	a, b := openLog(t, js), openLog(t, js)
	_, err := b.Commit(group1("b1"))
	require.NoError(t, err)
	early := openLog(t, js) // holds b1, started again later

	errs := stage(t, a, group1("a1"), group1("a2"))
	require.ErrorIs(t, errs[0], ErrFenced)
	require.Error(t, errs[1], "the group after a fenced one fails")
	require.Equal(t, uint64(4), streamMsgs(t, a), "a2 is stored: its fence matched b1's end")
	head, _ := a.Local().Head()
	require.Zero(t, head)

	c := openLog(t, js)
	require.Equal(t, uint64(4), c.Sequence(), "the copy read past the void batch")
	requireCopy(t, b.Local(), c.Local(), 1)
	_, err = c.Local().Outcome("admin", "a2")
	require.ErrorIs(t, err, eventlog.ErrNotFound, "the void batch is not in the copy")

	_, err = b.Commit(group1("b2"))
	require.ErrorIs(t, err, ErrFenced, "the void batch moved the stream past b")
	n, err := b.CatchUp(context.Background())
	require.NoError(t, err)
	require.Zero(t, n, "a void batch is no group")
	_, err = b.Commit(group1("b2"))
	require.NoError(t, err)

	_, err = c.CatchUp(context.Background())
	require.NoError(t, err)
	requireCopy(t, b.Local(), c.Local(), 2)
	again, err := Open(context.Background(), js, early.Local(), testConfig)
	require.NoError(t, err)
	_, err = again.CatchUp(context.Background())
	require.NoError(t, err)
	requireCopy(t, b.Local(), early.Local(), 2)
}

// A group whose acknowledgement is lost is in doubt, and fails the group
// staged after it even though the stream stored and acknowledged that
// one: neither reaches the writer's copy (so neither is answered). The
// stream holds both, a valid log that a copy takes whole. The writer
// refuses to stage anything more until it caught up, and then commits.
func TestFailedStagedGroupFailsTheGroupsAfterIt(t *testing.T) {
	js := connect(t, startServer(t))
	cfg := testConfig
	cfg.PublishTimeout = 300 * time.Millisecond
	w, err := Open(context.Background(), js, openLocal(t), cfg)
	require.NoError(t, err)
	lost := false
	w.loseAck = func(fence uint64) bool { // g1's, once
		lose := fence == 0 && !lost
		lost = lost || lose
		return lose
	}

	errs := stage(t, w, group1("g1"), group1("g2"))
	require.ErrorContains(t, errs[0], "in doubt")
	require.Equal(t, errs[0], errs[1], "the later group fails with the earlier one's failure")
	head, _ := w.Local().Head()
	require.Zero(t, head, "neither group is in the writer's copy")
	require.Equal(t, uint64(4), streamMsgs(t, w), "the stream stored both")

	c := openLog(t, js)
	h, _ := c.Local().Head()
	require.Equal(t, uint64(2), h, "a copy takes both")

	// NB: nothing is in flight now; a group staged after the failure
	// (decided on a state holding g1) would be stored behind g2 if the
	// writer's fence were its copy's. It is refused until a catch-up.
	_, err = w.Stage(group1("g3"))
	require.Equal(t, errs[0], err, "the failure outlives the groups in flight")
	_, err = w.CatchUp(context.Background())
	require.NoError(t, err)
	_, err = w.Commit(group1("g3"))
	require.NoError(t, err)
	requireCopy(t, w.Local(), openLog(t, js).Local(), 3)
}

// A follower that reads a group and then a void batch at the stream's end
// tells its caller it copied the group once it has read the void batch:
// the group was read while the void batch was pending, and the void batch
// is no group, but the caller (a follower's engine) must fold the group
// without waiting for the next one, which may not come for long.
func TestFollowTellsOfAGroupBeforeAVoidBatch(t *testing.T) {
	js := connect(t, startServer(t))
	a, b := openLog(t, js), openLog(t, js)
	f, err := Open(context.Background(), js, openLocal(t), testConfig)
	require.NoError(t, err)
	_, err = b.Commit(group1("b1"))
	require.NoError(t, err)
	errs := stage(t, a, group1("a1"), group1("a2"))
	require.ErrorIs(t, errs[0], ErrFenced)
	require.Equal(t, uint64(4), streamMsgs(t, a), "a2 is stored, void")

	ctx, cancel := context.WithCancel(context.Background())
	copied := make(chan struct{}, 16)
	done := make(chan error, 1)
	go func() { done <- f.Follow(ctx, func() { copied <- struct{}{} }) }()
	select {
	case <-copied:
	case <-time.After(10 * time.Second):
		t.Fatal("the follower never told of the group it copied")
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Equal(t, uint64(4), f.Sequence(), "read past the void batch")
	requireCopy(t, b.Local(), f.Local(), 1)
}
