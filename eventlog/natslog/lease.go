package natslog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// leaseKey is the one key of the lease bucket.
const leaseKey = "writer"

// ErrLeaseLost is returned by Renew when another holder took the lease or
// it expired: the caller is no longer the writer.
var ErrLeaseLost = errors.New("natslog: writer lease lost")

// Lease is the writer lease of one crewlog log: a key in a JetStream KV
// bucket whose entries expire TTL after their last write. Acquire creates
// the key (compare-and-set on its absence), Renew rewrites it expecting the
// revision this holder last wrote; a holder that stops renewing loses it
// after TTL, and another may take it.
//
// NB: a lease is not what keeps two writers apart — clocks and pauses make
// every lease unsafe on its own. The fence is Commit's expected last
// sequence; the lease only makes it rare that two crewds try to write.
//
// Concurrency: one goroutine per Lease.
type Lease struct {
	kv     jetstream.KeyValue
	holder string
	ttl    time.Duration
	rev    uint64
}

// OpenLease opens (creating if needed) the lease bucket of cfg's log for
// holder (a name unique to this crewd).
func OpenLease(ctx context.Context, js jetstream.JetStream, cfg Config, holder string, ttl time.Duration) (*Lease, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if holder == "" || ttl < 100*time.Millisecond {
		return nil, fmt.Errorf("natslog: a lease needs a holder name and a TTL of at least 100ms")
	}
	kv, err := callAPI(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: cfg.leaseBucket(), TTL: ttl,
			History: 1, Storage: jetstream.FileStorage, Replicas: cfg.Replicas, Description: "crewlog writer lease"})
	})
	if err != nil {
		return nil, fmt.Errorf("natslog: lease bucket: %w", err)
	}
	return &Lease{kv: kv, holder: holder, ttl: ttl}, nil
}

// TTL is how long the lease outlives its last renewal.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Acquire takes the lease if nobody holds it, and reports whether it did.
func (l *Lease) Acquire(ctx context.Context) (bool, error) {
	rev, err := l.kv.Create(ctx, leaseKey, []byte(l.holder))
	if errors.Is(err, jetstream.ErrKeyExists) {
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
// The key naming this holder says it is its own (holder names are unique):
// it renews from that revision instead of taking the lease for lost, which
// under load failed writers that held it.
func (l *Lease) Renew(ctx context.Context) error {
	rev, err := l.kv.Update(ctx, leaseKey, []byte(l.holder), l.rev)
	if isWrongLastSequence(err) {
		if e, gerr := l.kv.Get(ctx, leaseKey); gerr == nil && string(e.Value()) == l.holder && e.Revision() != l.rev {
			l.rev = e.Revision()
			rev, err = l.kv.Update(ctx, leaseKey, []byte(l.holder), l.rev)
		}
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
func (l *Lease) Release(ctx context.Context) error {
	return l.kv.Delete(ctx, leaseKey, jetstream.LastRevision(l.rev))
}

// Holder names who holds the lease ("" when nobody does).
func (l *Lease) Holder(ctx context.Context) (string, error) {
	e, err := l.kv.Get(ctx, leaseKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("natslog: read lease: %w", err)
	}
	return string(e.Value()), nil
}
