package httpapi

import (
	"container/list"
	"context"
	"sync"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// issuerCache remembers, per run, who issued and revoked each credential key, read from the run's stream
// incrementally (each request reads only the events since the last). The projection does not keep the actors, so a
// run met for the first time is a scan of its whole stream, up to its events quota (a million by default): O(the
// run), as a rebuild is, and a long one is charged as one.
//
// Bounds, since a reader names the runs it reads:
//   - at most maxIssuerRuns runs are kept; a new one takes the place of the least recently read (forgetting every
//     run at once, as it once did, made each request of a reader cycling through one run more a whole scan, and
//     every other reader's too);
//   - a scan of more than scanInTurn events (an events page's worth, maxEventScan) is a rebuild of its request's
//     principal (stateCache.turn): one at a time in all of crewd, at most maxRebuildsPerPrincipal per principal in
//     progress or waiting, then 429 too-many-rebuilds; a shorter one is paid for by the request's read turn alone,
//     as an events page is;
//   - a scan ends with its request: it stops within issuerCheckEvery events of the client going, and a request
//     waiting for another's scan of the same run stops waiting. What a stopped scan read is kept (the entry is
//     consistent after every event), so the next request goes on from there.
//
// A lookup never waits for a scan: it runs inside the engine's read, which holds up the publication of the next
// group while it lasts (commands.Engine.Read).
type issuerCache struct {
	mu    sync.Mutex
	runs  map[string]*runIssuers
	order list.List // of *runIssuers, the most recently read first

	// scanInTurn is the events a scan may read in its request's read turn alone: maxIssuerScanInTurn, or fewer in
	// a test, set before the server serves.
	scanInTurn uint64
}

// maxIssuerRuns bounds the runs whose actors are kept.
const maxIssuerRuns = 256

// maxIssuerScanInTurn is the events a scan reads without taking a rebuild turn: what an events page may look at.
const maxIssuerScanInTurn = maxEventScan

// issuerCheckEvery is the events a scan reads between two looks at its request's context (as projections.RunAt's
// fold: a millisecond or two of reading).
const issuerCheckEvery = 256

// runIssuers is one run's actors. A request brings it up to date holding scanning, then looks keys up under mu.
type runIssuers struct {
	run      string
	elem     *list.Element // in issuerCache.order
	scanning chan struct{} // holds one token while a request reads the run's stream: a lock waited for with a context
	next     uint64        // the next stream version to read; held with scanning

	mu   sync.Mutex // held only to record or look up one key, never across a read of the log
	keys map[string]keyActors
}

type keyActors struct{ issuedBy, revokedBy, revokedReason string }

func (c *issuerCache) init() {
	c.runs = make(map[string]*runIssuers)
	c.scanInTurn = maxIssuerScanInTurn
}

func (ri *runIssuers) lookup(key string) (keyActors, bool) {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	a, ok := ri.keys[key]
	return a, ok
}

// entry is run runID's entry, made the most recently read; a new one takes the place of the least recently read
// when maxIssuerRuns are kept. A request still using a forgotten entry finishes with it.
func (c *issuerCache) entry(runID string) *runIssuers {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ri := c.runs[runID]; ri != nil {
		c.order.MoveToFront(ri.elem)
		return ri
	}
	if len(c.runs) >= maxIssuerRuns {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.runs, old.Value.(*runIssuers).run)
	}
	ri := &runIssuers{run: runID, scanning: make(chan struct{}, 1), next: 1, keys: make(map[string]keyActors)}
	ri.elem = c.order.PushFront(ri)
	c.runs[runID] = ri
	return ri
}

// issuersOf brings run runID's entry up to position upTo for request ctx of principal p and returns it; length is
// the run's events (its last stream version), which tells a long scan before it starts. It fails with ctx's error
// once the client went, with the refusal (an *apiError) when the scan is a rebuild p may not start now, or with
// the log's error.
func (s *Server) issuersOf(ctx context.Context, p principal, runID string, length, upTo uint64) (*runIssuers, error) {
	ri := s.issuers.entry(runID)
	select {
	case ri.scanning <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-ri.scanning }()
	// NB: the rebuild turn is taken holding scanning, never the other way round: a rebuild in progress never waits
	// for a scan, so none can wait for the other. A request that waited for another's scan of the run finds little
	// left to read, and takes no turn.
	if unread := length + 1 - min(ri.next, length+1); unread > s.issuers.scanInTurn {
		done, err := s.states.turn(ctx, p)
		if err != nil {
			return nil, err
		}
		defer done()
	}
	return ri, ri.scan(ctx, s.opts.Log, upTo)
}

// scan reads the run's stream from ri.next up to position upTo, holding ri.scanning; it stops with ctx's error
// within issuerCheckEvery events of ctx ending, keeping what it read.
func (ri *runIssuers) scan(ctx context.Context, l *eventlog.Log, upTo uint64) error {
	it := l.ReadStream(ri.run, ri.next)
	defer it.Close()
	for n := 0; it.Next(); n++ {
		if n%issuerCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		rec := it.Event()
		if rec.Position > upTo {
			break
		}
		if rec.Type == events.TypeCredentialIssued || rec.Type == events.TypeCredentialRevoked {
			ev, err := projections.FromLog(rec)
			if err != nil {
				return err
			}
			ri.record(ev)
		}
		ri.next = rec.StreamVersion + 1
	}
	return it.Close()
}

// record keeps the actor of ev, a credential's issue or revocation.
func (ri *runIssuers) record(ev events.Event) {
	by := audit.ActorString(ev.Actor)
	ri.mu.Lock()
	defer ri.mu.Unlock()
	switch p := ev.Payload.(type) {
	case *events.CredentialIssued:
		ri.keys[p.TaskID] = keyActors{issuedBy: by}
	case *events.CredentialRevoked:
		a := ri.keys[p.TaskID]
		a.revokedBy, a.revokedReason = by, p.Reason
		ri.keys[p.TaskID] = a
	}
}
