package natslog

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

func group1(id string) []eventlog.Write {
	return []eventlog.Write{{Principal: "admin", CommandID: id, Result: []byte("{}"),
		Events: []eventlog.Event{{Stream: "r", Type: "run.created", Time: 1, Payload: []byte{0x80}}}}}
}

// groupAcross is a group of four messages: its manifest, and chunks on
// three crewlog streams (one an engine stream, encoded), with an outcome
// that wrote no events.
func groupAcross(id string) []eventlog.Write {
	ev := func(stream string) eventlog.Event {
		return eventlog.Event{Stream: stream, Type: "run.created", Time: 1, Payload: []byte{0x80}}
	}
	return []eventlog.Write{
		{Principal: "admin", CommandID: id + "-1", Result: []byte("{}"), Events: []eventlog.Event{ev("r1"), ev("r1")}},
		{Principal: "admin", CommandID: id + "-rej", Code: "bad-params", Reason: "no", Result: []byte("{}")},
		{Principal: "admin", CommandID: id + "-2", Result: []byte("{}"), Events: []eventlog.Event{ev("r2"), ev("$engine")}},
	}
}

const groupAcrossMessages = 4

// Two writers that both caught up publish against the same sequence: the
// first wins, the deposed one gets ErrFenced and appends nothing, anywhere:
// none of its batch's messages is stored.
func TestDeposedWriterCannotAppend(t *testing.T) {
	js := connect(t, startServer(t))
	a, b := openLog(t, js), openLog(t, js)

	_, err := a.Commit(groupAcross("from-a"))
	require.NoError(t, err)
	_, err = b.Commit(groupAcross("from-b"))
	require.ErrorIs(t, err, ErrFenced)

	head, _ := b.Local().Head()
	require.Zero(t, head, "the fenced group is not in the deposed writer's copy")
	st, err := a.stream.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(groupAcrossMessages), st.State.Msgs, "the stream holds only the winner's batch")

	// Once it has caught up, b may write again (a new term).
	n, err := b.CatchUp(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = b.Commit(groupAcross("from-b"))
	require.NoError(t, err)
	_, err = a.Commit(group1("from-a-again"))
	require.ErrorIs(t, err, ErrFenced)
	st, err = a.stream.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(2*groupAcrossMessages), st.State.Msgs)

	c := openLog(t, js)
	requireCopy(t, b.Local(), c.Local(), 8)
}

// Follow copies what another writer commits, in order, and tells after.
func TestFollowCopiesGroups(t *testing.T) {
	js := connect(t, startServer(t))
	w, f := openLog(t, js), openLog(t, js)
	ctx, cancel := context.WithCancel(context.Background())
	copied := make(chan struct{}, 16)
	done := make(chan error, 1)
	go func() { done <- f.Follow(ctx, func() { copied <- struct{}{} }) }()
	for _, id := range []string{"c1", "c2", "c3"} {
		_, err := w.Commit(group1(id))
		require.NoError(t, err)
	}
	for f.Sequence() < w.Sequence() {
		<-copied
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	requireCopy(t, w.Local(), f.Local(), 3)
}

// The lease goes to one holder at a time, and stays with it while it
// renews. NB: the TTL is a minute, so that no stall of the machine between
// two steps lets the lease expire under them (the server's clock expires
// it, and no test can hold that clock still).
func TestLeaseIsExclusive(t *testing.T) {
	js := connect(t, startServer(t))
	ctx := context.Background()
	a, b := openLeases(t, js, "a", "b")

	requireAcquire(t, a, true)
	requireAcquire(t, b, false)
	require.NoError(t, a.Renew(ctx))
	requireAcquire(t, b, false)
	require.ErrorIs(t, b.Renew(ctx), ErrLeaseLost, "b never held it")
	holder, err := b.Holder(ctx)
	require.NoError(t, err)
	require.Equal(t, "a", holder)
	require.NoError(t, a.Renew(ctx))
}

// A holder that stops renewing loses the lease once its TTL has passed:
// its key is written to expire TTL after its last write, another holder
// then takes the lease, and the first one's next renewal says it lost it.
func TestLeaseExpires(t *testing.T) {
	js := connect(t, startServer(t))
	ctx := context.Background()
	const ttl = 200 * time.Millisecond
	a, err := OpenLease(ctx, js, testConfig, "a", ttl)
	require.NoError(t, err)
	b, err := OpenLease(ctx, js, testConfig, "b", ttl)
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, testConfig.leaseBucket())
	require.NoError(t, err)
	st, err := kv.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, ttl, st.TTL(), "the lease's key expires TTL after its last write")

	requireAcquire(t, a, true)
	// Polled: the server signals no expiry. The bound is a guard against a
	// lease that never expires, not a measure of when it does.
	for deadline := time.Now().Add(time.Minute); ; {
		ok, err := b.Acquire(ctx)
		require.NoError(t, err)
		if ok {
			break
		}
		require.True(t, time.Now().Before(deadline), "a lease nobody renews did not expire")
		time.Sleep(ttl / 5)
	}
	require.ErrorIs(t, a.Renew(ctx), ErrLeaseLost)
	holder, err := a.Holder(ctx)
	require.NoError(t, err)
	require.NotEqual(t, "a", holder, "b's lease, or none once it expired too")
}

// A renewal whose caller gave up waiting (its context ended under load)
// may still be stored: the key then names the holder at a revision the
// holder never learnt. The holder's next renewal finds it and renews from
// there instead of taking the lease for lost; a key that names another
// holder is still lost.
func TestLeaseRenewalStoredAfterItsCallerGaveUpIsKept(t *testing.T) {
	ctx := context.Background()
	_, a, kv := heldLease(t)

	// The late renewal: the same update a's Renew sends, stored while a
	// no longer waited for its answer.
	late, err := kv.Update(ctx, leaseKey, []byte(a.value), a.rev)
	require.NoError(t, err)

	require.NoError(t, a.Renew(ctx))
	require.Greater(t, a.rev, late, "renewed after the late renewal, not merely adopted it")
	require.NoError(t, a.Renew(ctx))

	// Another holder's entry at an unknown revision is a lost lease.
	_, err = kv.Update(ctx, leaseKey, []byte("b"), a.rev)
	require.NoError(t, err)
	require.ErrorIs(t, a.Renew(ctx), ErrLeaseLost)
}

// A create whose caller gave up waiting (its reply lost) may still be
// stored: the key then holds the holder's own value. Its next Acquire takes
// the lease, renewed, instead of leaving it to expire with no writer; a key
// that holds another holder's value is still not taken.
func TestLeaseCreateStoredAfterItsCallerGaveUpIsTaken(t *testing.T) {
	js := connect(t, startServer(t))
	ctx := context.Background()
	a, b := openLeases(t, js, "a", "b")
	kv, err := js.KeyValue(ctx, testConfig.leaseBucket())
	require.NoError(t, err)

	// The lost create: the one a's Acquire sends, stored while a no longer
	// waited for its answer.
	stored, err := kv.Create(ctx, leaseKey, []byte(a.value))
	require.NoError(t, err)

	requireAcquire(t, b, false)
	requireAcquire(t, a, true)
	require.Greater(t, a.rev, stored, "renewed from the stored create, not merely adopted it")
	require.NoError(t, a.Renew(ctx))
	requireAcquire(t, b, false)
	require.ErrorIs(t, b.Renew(ctx), ErrLeaseLost)
}

// Release gives up a lease whose last renewal was stored after its caller
// gave up waiting (a node that failed meanwhile), so a successor need not
// wait for the TTL; it never deletes a key that names another holder.
func TestLeaseReleaseAfterARenewalItsCallerGaveUp(t *testing.T) {
	ctx := context.Background()
	js, a, kv := heldLease(t)
	b, err := OpenLease(ctx, js, testConfig, "b", time.Minute)
	require.NoError(t, err)

	// Another holder's entry is not this holder's to delete.
	theirs, err := kv.Update(ctx, leaseKey, []byte(b.value), a.rev)
	require.NoError(t, err)
	require.Error(t, a.Release(ctx))
	holder, err := a.Holder(ctx)
	require.NoError(t, err)
	require.Equal(t, "b", holder)

	// a's own entry at a revision it never learnt (put back as a late
	// renewal would have stored it) is.
	_, err = kv.Update(ctx, leaseKey, []byte(a.value), theirs)
	require.NoError(t, err)
	require.NoError(t, a.Release(ctx))
	holder, err = b.Holder(ctx)
	require.NoError(t, err)
	require.Empty(t, holder)
	requireAcquire(t, b, true) // the lease is free at once
}

// heldLease starts a server and opens the lease of holder "a" (a TTL of
// a minute), which takes it; it returns the lease's bucket beside it.
func heldLease(t *testing.T) (jetstream.JetStream, *Lease, jetstream.KeyValue) {
	t.Helper()
	js := connect(t, startServer(t))
	ctx := context.Background()
	a, err := OpenLease(ctx, js, testConfig, "a", time.Minute)
	require.NoError(t, err)
	requireAcquire(t, a, true)
	kv, err := js.KeyValue(ctx, testConfig.leaseBucket())
	require.NoError(t, err)
	return js, a, kv
}

// openLeases opens the leases of two holders, named a and b, with a TTL of
// a minute; neither takes it.
func openLeases(t *testing.T, js jetstream.JetStream, a, b string) (*Lease, *Lease) {
	t.Helper()
	la, err := OpenLease(context.Background(), js, testConfig, a, time.Minute)
	require.NoError(t, err)
	lb, err := OpenLease(context.Background(), js, testConfig, b, time.Minute)
	require.NoError(t, err)
	return la, lb
}

// requireAcquire requires that l's Acquire succeeds and takes the lease
// (want) or finds it held.
func requireAcquire(t *testing.T, l *Lease, want bool) {
	t.Helper()
	ok, err := l.Acquire(context.Background())
	require.NoError(t, err)
	require.Equal(t, want, ok)
}

// Two crewds given one name are still two holders: the second cannot take
// the first's lease for its own and renew it, and the name is what Holder
// shows.
func TestLeaseOfTheSameNameIsAnotherHolder(t *testing.T) {
	js := connect(t, startServer(t))
	ctx := context.Background()
	first, second := openLeases(t, js, "crewd/1", "crewd/1")
	requireAcquire(t, first, true)
	requireAcquire(t, second, false)

	require.ErrorIs(t, second.Renew(ctx), ErrLeaseLost)
	require.NoError(t, first.Renew(ctx))
	holder, err := second.Holder(ctx)
	require.NoError(t, err)
	require.Equal(t, "crewd/1", holder)
}
