package natslog

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// leaseKey is the one key of the lease bucket.
const leaseKey = "writer"

// ErrLeaseLost is returned by Renew when another holder took the lease or
// it expired: the caller is no longer the writer.
var ErrLeaseLost = errors.New("natslog: writer lease lost")

// ErrLeaseTTL is returned by OpenLease when the lease bucket exists with another TTL than the caller's.
var ErrLeaseTTL = errors.New("natslog: the writer lease has another TTL")

// Lease is the writer lease of one crewlog log: a key in a JetStream KV
// bucket whose entries expire TTL after their last write. Acquire creates
// the key (compare-and-set on its absence), Renew rewrites it expecting the
// revision this holder last wrote; a holder that stops renewing loses it
// after TTL, and another may take it. The key holds the holder's name and
// a nonce of this opening ("name/nonce"), so two crewds given one name
// (the name is the operator's free text) are still two holders.
//
// NB: a lease is not what keeps two writers apart — clocks and pauses make
// every lease unsafe on its own. The fence is Commit's expected last
// sequence; the lease only makes it rare that two crewds try to write.
//
// Concurrency: one goroutine per Lease.
type Lease struct {
	kv     jetstream.KeyValue
	holder string
	value  string // the key's value while this opening holds it: holder/nonce
	ttl    time.Duration
	rev    uint64
}

// OpenLease opens (creating if needed) the lease bucket of cfg's log for
// holder (the crewd's name, shown by Holder; two crewds given one name
// are still two holders).
//
// NB: an existing bucket is opened as it is, never updated to the caller's
// settings: the bucket is every holder's, and one node's settings would
// change the others' (a JetStream KV update applies to the whole bucket).
// Its replicas are the first opener's, as the stream's are its creator's.
// Its TTL is refused when it is not the caller's (ErrLeaseTTL, naming
// both): a holder renews every quarter of its own TTL and gives up after
// three quarters, so a bucket TTL shorter than a writer's lets another
// node take the lease while that writer still writes, and a longer one
// leaves a dead writer unreplaced for longer than the other nodes wait.
func OpenLease(ctx context.Context, js jetstream.JetStream, cfg Config, holder string,
	ttl time.Duration) (*Lease, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if holder == "" || ttl < 100*time.Millisecond {
		return nil, fmt.Errorf("natslog: a lease needs a holder name and a TTL of at least 100ms")
	}
	bucket := cfg.leaseBucket()
	kv, err := callAPI(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, TTL: ttl, History: 1,
			Storage: jetstream.FileStorage, Replicas: cfg.Replicas, Description: "crewlog writer lease"})
		if errors.Is(err, jetstream.ErrBucketExists) { // with other settings than these
			kv, err = js.KeyValue(ctx, bucket)
		}
		return kv, err
	})
	if err != nil {
		return nil, fmt.Errorf("natslog: lease bucket: %w", err)
	}
	st, err := callAPI(ctx, kv.Status)
	if err != nil {
		return nil, fmt.Errorf("natslog: lease bucket: %w", err)
	}
	if st.TTL() != ttl {
		return nil, fmt.Errorf("%w: bucket %s expires the lease %s after its last renewal, this node asks %s: "+
			"start every node of the log with the bucket's TTL, or stop them all and delete the bucket to change it",
			ErrLeaseTTL, bucket, st.TTL(), ttl)
	}
	return &Lease{kv: kv, holder: holder, value: holder + "/" + rand.Text(), ttl: ttl}, nil
}

// TTL is how long the lease outlives its last renewal.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Acquire takes the lease if nobody holds it, or if the key holds this
// opening's own value (acquireStored), and reports whether it did.
func (l *Lease) Acquire(ctx context.Context) (bool, error) {
	rev, err := l.kv.Create(ctx, leaseKey, []byte(l.value))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return l.acquireStored(ctx)
	}
	if err != nil {
		return false, fmt.Errorf("natslog: acquire lease: %w", err)
	}
	l.rev = rev
	return true, nil
}

// acquireStored takes the lease when the key that exists holds this
// opening's value: a create whose caller stopped waiting (its reply lost,
// its context ended) that was stored all the same. Taken for another
// holder's, the lease would stay with nobody until it expired, a TTL with
// no writer. It is renewed from the revision it was stored at, so that it
// runs a whole TTL from this call, as a lease just created does; it reports
// false when the key holds another holder's value, or changed meanwhile.
func (l *Lease) acquireStored(ctx context.Context) (bool, error) {
	stored, ok, err := l.ownEntry(ctx)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil // expired meanwhile: the next Acquire creates it
	case err != nil:
		return false, fmt.Errorf("natslog: acquire lease: %w", err)
	case !ok:
		return false, nil
	}
	rev, err := l.kv.Update(ctx, leaseKey, []byte(l.value), stored)
	if isWrongLastSequence(err) || errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("natslog: acquire lease: %w", err)
	}
	l.rev = rev
	return true, nil
}

// Renew extends the lease this holder has; ErrLeaseLost if it has not.
//
// NB: a renewal whose caller stopped waiting (its context ended while the
// server was slow to answer) may still be stored, at a revision this
// holder never learnt; the next renewal is then refused for its revision.
// A key holding this opening's value (its name and nonce) is its own, even
// under a name another crewd was given too: it renews from that revision
// instead of taking the lease for lost, which under load failed writers
// that held it.
func (l *Lease) Renew(ctx context.Context) error {
	rev, err := l.kv.Update(ctx, leaseKey, []byte(l.value), l.rev)
	if isWrongLastSequence(err) && l.adopt(ctx) {
		rev, err = l.kv.Update(ctx, leaseKey, []byte(l.value), l.rev)
	}
	if err != nil {
		if isWrongLastSequence(err) || errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("%w: %v", ErrLeaseLost, err)
		}
		return fmt.Errorf("natslog: renew lease: %w", err)
	}
	l.rev = rev
	return nil
}

// Release gives the lease up at once if this holder still has it.
//
// NB: as in Renew, a renewal abandoned while the server was slow (the
// node failed meanwhile) may have been stored at a revision this holder
// never learnt: a key holding this opening's value is its own, and is
// deleted at the revision it has.
func (l *Lease) Release(ctx context.Context) error {
	err := l.kv.Delete(ctx, leaseKey, jetstream.LastRevision(l.rev))
	if isWrongLastSequence(err) && l.adopt(ctx) {
		err = l.kv.Delete(ctx, leaseKey, jetstream.LastRevision(l.rev))
	}
	return err
}

// adopt reads the key after a write at this holder's revision was refused
// for it, and takes its revision for this holder's when it holds this
// opening's value (a write the holder stopped waiting for, stored at a
// revision it never learnt); it reports whether it did.
func (l *Lease) adopt(ctx context.Context) bool {
	rev, ok, err := l.ownEntry(ctx)
	if err != nil || !ok || rev == l.rev {
		return false
	}
	l.rev = rev
	return true
}

// ownEntry reads the key and reports its revision and whether it holds this
// opening's value.
func (l *Lease) ownEntry(ctx context.Context) (rev uint64, own bool, err error) {
	e, err := l.kv.Get(ctx, leaseKey)
	if err != nil {
		return 0, false, err
	}
	return e.Revision(), string(e.Value()) == l.value, nil
}

// Holder names who holds the lease ("" when nobody does): its holder name,
// without the nonce of its opening.
func (l *Lease) Holder(ctx context.Context) (string, error) {
	e, err := l.kv.Get(ctx, leaseKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("natslog: read lease: %w", err)
	}
	return holderName(string(e.Value())), nil
}

// holderName is the holder name in a lease key's value: before the last
// "/", which ends the name and starts the nonce.
func holderName(value string) string {
	if i := strings.LastIndexByte(value, '/'); i >= 0 {
		return value[:i]
	}
	return value
}
