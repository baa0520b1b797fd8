package httpapi

import (
	"container/list"
	"context"
	"sync"

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
//   - at most maxIssuerRuns runs are kept, in two sections (segmented LRU). A run enters the trial section
//     (maxIssuerTrialRuns), taking the place of its least recently read run; a run read again while there moves
//     to the main section. So the runs read once churn the trial section, not main (a single LRU of every run
//     would forget every run of every reader to one reader going through more runs than it keeps, and make each
//     of their requests a whole scan);
//   - a run that leaves trial is remembered by its id alone (a ghost) while it is among the last maxIssuerGhosts
//     runs to leave trial and not read since: a request that reads it then moves it straight to main, having read
//     its actors again from the stream's start. So to keep a run out of main, at least maxIssuerTrialRuns +
//     maxIssuerGhosts runs new to the cache must enter trial between two of its reads (without ghosts,
//     maxIssuerTrialRuns small runs read by another reader would do, and make each read of a large run a whole
//     scan);
//   - a run in main belongs for good to the reader whose read moved it there (from trial or as a ghost): a read by
//     anyone makes it main's most recently read run, and changes neither its owner nor what is kept. A reader owns
//     at most maxIssuerRunsPerReader runs there: moving one more there forgets its own least recently read run
//     there; else, main full, main's least recently read run makes room, whoever owns it. So a reader going through
//     many runs holds at most its share of main's places, taken from the least recently read runs, and at its
//     share replaces only its own. (Were a run its last reader's, a reader reading each of the others' runs in
//     main once would take them over and, past its share, forget them.);
//   - only a request that read the run, or some of it before its client went (kept for the next request),
//     changes the cache: one refused (429) or whose client went before it read anything leaves it as it was. A
//     refused request's reading of a run not kept is dropped: its client asks again after Retry-After, and reads
//     that again in its read turn. And a request whose client went moves no run up: its run, if new to the cache,
//     takes a place on trial, a ghost too;
//   - a scan reads up to scanInTurn events (an events page's worth, maxEventScan) in its request's read turn, as
//     an events page does; beyond, it is a rebuild of the request's principal (stateCache.turn): one at a time in
//     all of crewd, at most maxRebuildsPerPrincipal per principal in progress or waiting, then 429
//     too-many-rebuilds. What is charged is what the scan reads (every event of the stream, foreign.imported
//     ones too, which the run's usage does not count), not an estimate made before it;
//   - a scan ends with its request: it stops within issuerCheckEvery events of the client going, and a request
//     waiting for another's scan of the same run stops waiting. What a stopped scan read is kept (the entry is
//     consistent after every event), so the next request goes on from there.
//
// A lookup never waits for a scan: it runs inside the engine's read, which holds up the publication of the next
// group while it lasts (commands.Engine.Read).
type issuerCache struct {
	mu    sync.Mutex
	runs  map[string]*runIssuers // the kept runs, and the runs a request is reading for the first time
	trial list.List              // of *runIssuers: runs read once, the most recently read first
	main  list.List              // of *runIssuers: runs read again, the most recently read first
	owned map[string]int         // main's runs per principal key that moved each there; no zero counts

	// ghosts are the ids of the runs that left trial last, the most recent first (list of string): none is in
	// trial or main.
	ghosts   list.List
	ghostsOf map[string]*list.Element

	// scanInTurn is the events a scan may read in its request's read turn alone: maxIssuerScanInTurn, or fewer in
	// a test, set before the server serves.
	scanInTurn uint64
}

const (
	// maxIssuerRuns bounds the runs whose actors are kept, both sections together.
	maxIssuerRuns = 256
	// maxIssuerTrialRuns is the trial section's share of maxIssuerRuns: the runs read once, last.
	maxIssuerTrialRuns = 32
	// maxIssuerRunsPerReader bounds the main section's runs that one principal moved there: a quarter of it.
	maxIssuerRunsPerReader = (maxIssuerRuns - maxIssuerTrialRuns) / 4
	// maxIssuerGhosts bounds the ids of runs that left trial kept to recognise a run read again (no actors).
	//
	// NB: ghosts rather than a trial quota per reader. A quota small enough that one reader could not push the
	// others' runs out of trial (a quarter of it, 8) would keep on trial for good a reader's own round of more runs
	// than that: the dashboard's health view reads the credentials of up to 25 runs per refresh with one
	// credential, and each of its refreshes would be 25 whole scans. Ghosts keep that round reaching main (within
	// the reader's share, as any run), whoever reads what in between, short of maxIssuerTrialRuns +
	// maxIssuerGhosts runs new to the cache; what they cost is one more whole scan of a run that left trial.
	maxIssuerGhosts = 256
)

// maxIssuerScanInTurn is the events a scan reads without taking a rebuild turn: what an events page may look at.
const maxIssuerScanInTurn = maxEventScan

// issuerCheckEvery is the events a scan reads between two looks at its request's context (as projections.RunAt's
// fold: a millisecond or two of reading).
const issuerCheckEvery = 256

// runIssuers is one run's actors. A request brings it up to date holding scanning, then looks keys up under mu.
type runIssuers struct {
	run string

	// Under issuerCache.mu. An entry is new (elem nil, not forgotten) until a request has read some of the run,
	// then in trial or main, until forgotten.
	elem      *list.Element // in issuerCache.trial, or main if inMain
	inMain    bool
	owner     string // in main: the principal key whose read moved the run there
	users     int    // requests between acquire and release
	forgotten bool   // no longer in issuerCache.runs: its requests finish with it, and change nothing

	scanning chan struct{} // holds one token while a request reads the run's stream: a lock waited for with a context
	next     uint64        // the next stream version to read; held with scanning

	mu   sync.Mutex // held only to record or look up one key, never across a read of the log
	keys map[string]keyActors
}

type keyActors struct{ issuedBy, revokedBy, revokedReason string }

func (c *issuerCache) init() {
	c.runs = make(map[string]*runIssuers)
	c.owned = make(map[string]int)
	c.ghostsOf = make(map[string]*list.Element)
	c.scanInTurn = maxIssuerScanInTurn
}

func (ri *runIssuers) lookup(key string) (keyActors, bool) {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	a, ok := ri.keys[key]
	return a, ok
}

// acquire returns run runID's entry, a new one if it has none, in use by its caller until release. A new entry
// takes no place: it is in runs only so that the requests reading the run at once share its scan, and there are
// no more of them than requests in progress.
func (c *issuerCache) acquire(runID string) *runIssuers {
	c.mu.Lock()
	defer c.mu.Unlock()
	ri := c.runs[runID]
	if ri == nil {
		ri = &runIssuers{run: runID, scanning: make(chan struct{}, 1), next: 1, keys: make(map[string]keyActors)}
		c.runs[runID] = ri
	}
	ri.users++
	return ri
}

// release ends a request's use of ri, the request of the principal whose key is reader: read says it read the run
// up to its position, kept that the request read some of the run, and its client went (what it read is worth
// keeping for the next request). A read run moves up, or to main if on trial or a ghost; a kept one new to the
// cache enters trial. Otherwise the cache is left as it was: a new entry that no request uses any more is dropped
// (a request refused its rebuild turn asks again after Retry-After, and reads its read turn's share again then).
func (c *issuerCache) release(ri *runIssuers, reader string, read, kept bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ri.users--
	switch {
	case ri.forgotten:
	case read && ri.elem != nil:
		c.readAgain(ri, reader)
	case (read || kept) && ri.elem == nil:
		// A run read in full that left trial lately is read again: to main. One whose client went takes a place
		// on trial as any new run (only a request that read the run moves a run up), and is no ghost any more.
		if ghost := c.unghost(ri.run); ghost && read {
			c.promote(ri, reader)
			break
		}
		ri.elem = c.trial.PushFront(ri)
		if c.trial.Len() > maxIssuerTrialRuns {
			old := c.trial.Back().Value.(*runIssuers)
			c.forget(old)
			c.ghost(old.run)
		}
	case ri.elem == nil && ri.users == 0:
		c.forget(ri)
	}
}

// readAgain makes ri, in trial or main, main's most recently read run: moved there from trial, reader's.
func (c *issuerCache) readAgain(ri *runIssuers, reader string) {
	if ri.inMain {
		// NB: the run stays its owner's. Counted against whoever read it last, a reader reading each of the others'
		// runs once took them over, and past its share forgot them.
		c.main.MoveToFront(ri.elem)
		return
	}
	c.trial.Remove(ri.elem)
	c.promote(ri, reader)
}

// promote puts ri, in neither section, at the front of main, reader's for as long as it stays, and forgets the run
// that makes room: reader's least recently read in main beyond its share, else main's least recently read.
func (c *issuerCache) promote(ri *runIssuers, reader string) {
	ri.elem, ri.inMain, ri.owner = c.main.PushFront(ri), true, reader
	c.owned[reader]++
	if c.owned[reader] > maxIssuerRunsPerReader {
		// NB: a walk of main (≤ maxIssuerRuns), only when a reader has more than its share: its own oldest is
		// near the back once it is at its share.
		for e := c.main.Back(); e != nil; e = e.Prev() {
			if old := e.Value.(*runIssuers); old.owner == reader {
				c.forget(old)
				break
			}
		}
	}
	if c.main.Len() > maxIssuerRuns-maxIssuerTrialRuns {
		c.forget(c.main.Back().Value.(*runIssuers))
	}
}

// ghost remembers run, which left trial, as the most recent ghost, and forgets the oldest beyond maxIssuerGhosts.
func (c *issuerCache) ghost(run string) {
	c.ghostsOf[run] = c.ghosts.PushFront(run)
	if c.ghosts.Len() > maxIssuerGhosts {
		delete(c.ghostsOf, c.ghosts.Remove(c.ghosts.Back()).(string))
	}
}

// unghost forgets run as a ghost, and says whether it was one.
func (c *issuerCache) unghost(run string) bool {
	e := c.ghostsOf[run]
	if e == nil {
		return false
	}
	c.ghosts.Remove(e)
	delete(c.ghostsOf, run)
	return true
}

// disown uncounts ri, in main, from its owner.
func (c *issuerCache) disown(ri *runIssuers) {
	if c.owned[ri.owner]--; c.owned[ri.owner] == 0 {
		delete(c.owned, ri.owner)
	}
}

// forget drops ri from the cache; a request still using it finishes with it.
func (c *issuerCache) forget(ri *runIssuers) {
	if ri.elem != nil {
		if ri.inMain {
			c.main.Remove(ri.elem)
			c.disown(ri)
		} else {
			c.trial.Remove(ri.elem)
		}
	}
	if c.runs[ri.run] == ri {
		delete(c.runs, ri.run)
	}
	ri.elem, ri.forgotten = nil, true
}

// issuersOf brings run runID's entry up to position upTo for request ctx of principal p and returns it. It fails
// with ctx's error once the client went, with the refusal (an *apiError) when the scan needs a rebuild turn p may
// not take now, or with the log's error.
func (s *Server) issuersOf(ctx context.Context, p principal, runID string, upTo uint64) (_ *runIssuers, err error) {
	ri := s.issuers.acquire(runID)
	progressed := false // this request read some of the run
	defer func() { s.issuers.release(ri, p.key, err == nil, progressed && ctx.Err() != nil) }()
	select {
	case ri.scanning <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	from := ri.next
	defer func() {
		progressed = ri.next > from
		<-ri.scanning
	}()
	more, err := ri.scan(ctx, s.opts.Log, upTo, s.issuers.scanInTurn)
	if err != nil || !more {
		return ri, err
	}
	// NB: the rebuild turn is taken holding scanning, never the other way round: a rebuild in progress never waits
	// for a scan, so none can wait for the other. A request that waited for another's scan of the run finds little
	// left to read, and takes no turn.
	done, err := s.states.turn(ctx, p)
	if err != nil {
		return nil, err
	}
	defer done()
	_, err = ri.scan(ctx, s.opts.Log, upTo, 0)
	return ri, err
}

// scan reads the run's stream from ri.next up to position upTo, holding ri.scanning, at most limit events (0: no
// limit); more says it stopped at limit with events up to upTo left. It stops with ctx's error within
// issuerCheckEvery events of ctx ending, keeping what it read.
func (ri *runIssuers) scan(ctx context.Context, l *eventlog.Log, upTo, limit uint64) (more bool, err error) {
	it := l.ReadStream(ri.run, ri.next)
	defer it.Close()
	for n := uint64(0); it.Next(); n++ {
		if n%issuerCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return false, err
			}
		}
		rec := it.Event()
		if rec.Position > upTo {
			break
		}
		if limit != 0 && n == limit {
			return true, it.Close()
		}
		if rec.Type == events.TypeCredentialIssued || rec.Type == events.TypeCredentialRevoked {
			ev, err := projections.FromLog(rec)
			if err != nil {
				return false, err
			}
			ri.record(ev)
		}
		ri.next = rec.StreamVersion + 1
	}
	return false, it.Close()
}

// record keeps the actor of ev, a credential's issue or revocation.
func (ri *runIssuers) record(ev events.Event) {
	by := ev.Actor.String()
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
