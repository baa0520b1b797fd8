package projections

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/events/msgpackappend"
)

// SnapshotFormat is the version of the snapshot encoding written by
// EncodeSnapshot. DecodeSnapshot refuses any other: a snapshot is only an
// optimisation, so an unreadable one is rebuilt from the log, never migrated.
// Format 2 added each run's usage counters (Run.Usage); format 3 each
// task's kind, a run's explicit budgetTotal 0 and thresholds, and the
// config's budget mode; format 4 each run's last position and cold runs as
// a summary only; format 5 a cold run's orchestrator credential in its
// summary; format 6 each run's jobs and revoked lease roots; format 7 a
// cold run's noView (its view is not known to be written, coldview.go);
// format 8 lists only the runs whose summary is not in the index of
// summaries (runindex.go), with their creation ordinals, the number of
// runs and the cold runs whose view is missing; format 9 each credential's
// actors (IssuedBy, RevokedBy) and revocation reason; format 10 each
// delegation's ParentAttempt; format 11 what each task's worker appended as
// its actor (Task.ActorEvents, ActorBytes); format 12 counts there what the
// workers of the delegations a task started appended too, and their results
// (shareHolder, resultOf); format 13 when each task last waited for a slot
// (Task.SlotWaitAt); format 14 whose share of the slots each delegation
// counts for (Delegation.ShareHolder), and counts the workers' appends by the
// config's shareByDelegator in force at each event. An older snapshot lacks
// them, so it is refused and the state rebuilt from position 1.
//
// NB: this format alone is read. Every older one counted a delegation's
// worker for its delegating task whatever the config (a state decoded from
// one would refuse a worker of a log written before shareByDelegator that
// the fold from position 1 admits), the older still lacks which tasks wait for
// a slot (a state decoded from one would admit a worker past its share of
// its run's slots that the fold from position 1 refuses), the older still
// what each worker appended with its delegations (one would let a worker
// past its share of the events and bytes quotas that the fold refuses), the
// older still what each worker appended at all and the delegations' parent
// attempts, and the older still the credentials' actors: a state decoded
// from one would answer without them (settle a delegation of the parent's
// present attempt as if a retry had ended it) where the fold from
// position 1 answers with them. The same goes for views
// (coldview.go, the same run record, stamped with the format): an older
// one is ignored and its run re-folded, and the fold from position 1 that
// a refused snapshot causes writes every view and summary again (the
// summaries at the versions already there).
const SnapshotFormat uint16 = 14

// readableFormat reports whether DecodeSnapshot and a view's decoder read
// format f: SnapshotFormat alone (see its NB).
func readableFormat(f uint16) bool { return f == SnapshotFormat }

// ErrBadSnapshot wraps every DecodeSnapshot failure.
var ErrBadSnapshot = errors.New("projections: bad snapshot")

// snapshot is the encoded form of a State: its primary records only, each
// list in the state's own deterministic order. Indexes (slots held, mailbox
// boxes, message index, order slices) are rebuilt on decode by the same
// helpers the fold uses.
type snapshot struct {
	Position uint64 `msgpack:"position"`
	Config   Config `msgpack:"config"`
	// RunCount is the number of runs ever created (State.nruns); Ords the
	// creation ordinal of each run listed, ascending; MissingViews the cold
	// runs whose view is not known to be written, sorted.
	RunCount     int           `msgpack:"runCount"`
	Ords         []int         `msgpack:"ords"`
	MissingViews []string      `msgpack:"missingViews"`
	Runs         []snapshotRun `msgpack:"runs"`
}

type snapshotRun struct {
	Run *Run `msgpack:"run"`
	// Last is the position of the run's last event; Cold marks a cold run,
	// stored as its Run and its orchestrator credential alone (its records
	// are re-folded from the log).
	Last        uint64        `msgpack:"last"`
	Cold        bool          `msgpack:"cold"`
	Tasks       []*Task       `msgpack:"tasks"`
	Delegations []*Delegation `msgpack:"delegations"`
	Accounts    []*Account    `msgpack:"accounts"`
	Messages    []Message     `msgpack:"messages"`
	// msgs is a hot run's log, encoded in place of Messages (left nil), so
	// that encoding a run copies none of its messages; a decoded run has
	// Messages and no log.
	msgs        *messageLog
	Asks        []*Ask        `msgpack:"asks"`
	Credentials []*Credential `msgpack:"credentials"`
	// RootSpent is the run pool's spend (State.RootSpent), kept as the
	// fold counted it.
	RootSpent int64 `msgpack:"rootSpent"`
	// Jobs and RevokedRoots are the run's dispatcher jobs (jobs.go).
	Jobs         []*Job        `msgpack:"jobs"`
	RevokedRoots *RevokedRoots `msgpack:"revokedRoots"`
	// NoView marks a cold run whose view is not known to be written
	// (coldview.go): the engine writes it in the background after a
	// restart too.
	NoView bool `msgpack:"noView"`
}

// EncodeSnapshot encodes s: the format version (a msgpack uint16) followed by
// one msgpack map. The same state always gives the same bytes. The storage
// layer adds the checksum.
func EncodeSnapshot(s *State) ([]byte, error) {
	snap := toSnapshot(s)
	b := make([]byte, 0, snapshotSizeHint(&snap))
	b = msgpackappend.Uint16(b, SnapshotFormat)
	b, err := appendSnapshot(b, &snap, nil)
	if err != nil {
		return nil, fmt.Errorf("projections: encoding snapshot: %w", err)
	}
	return b, nil
}

// SnapshotEncoder writes EncodeSnapshot's bytes to an io.Writer in one pass,
// from a copy of the state's primary records that NewSnapshotEncoder takes.
// Why a copy of the records and not a Clone of the state: the copy is made
// while the state is held still (the engine's read lock, which its
// publisher waits for), and a Clone also builds every map and index a
// state keeps (one insert per record), which a snapshot never reads. Why a
// writer: the bytes go out in pieces of about snapshotSpill as they are
// encoded (eventlog.Log.SaveSnapshotFrom cuts them into the chunks it
// stores), so they are encoded once, never measured first, and never held
// in a buffer of their own.
//
// Concurrency: NewSnapshotEncoder needs s held still; WriteTo reads the
// copy alone, so it may run on any goroutine while s changes, and again.
// Errors: WriteTo returns the writer's first error, or the encoding's,
// wrapped.
type SnapshotEncoder struct {
	snap    snapshot
	records int64
}

// NewSnapshotEncoder copies the records of s a snapshot holds. s must not
// change while it runs; once it returns, the encoder shares nothing the
// fold writes to (cold runs' summaries are never changed in place) and s
// may change again.
func NewSnapshotEncoder(s *State) *SnapshotEncoder {
	return &SnapshotEncoder{snap: snapshotOf(s, copySnapshotRun), records: s.SnapshotRecords()}
}

// Position is the position of the state copied.
func (e *SnapshotEncoder) Position() uint64 { return e.snap.Position }

// Records is the state's SnapshotRecords when it was copied.
func (e *SnapshotEncoder) Records() int64 { return e.records }

// snapshotSpill is how many bytes of encoding the encoder holds before it
// hands them to the writer (a variable for tests, which make every record
// spill).
var snapshotSpill = 64 << 10

// WriteTo writes the encoding to w: the bytes EncodeSnapshot returns for
// the state copied. It may be called again, and writes the same bytes.
func (e *SnapshotEncoder) WriteTo(w io.Writer) (int64, error) {
	sp := &spiller{sink: w}
	b := msgpackappend.Uint16(make([]byte, 0, 2*snapshotSpill), SnapshotFormat)
	b, err := appendSnapshot(b, &e.snap, sp)
	if err == nil {
		sp.flush(b)
		err = sp.err
	}
	if err != nil {
		return sp.n, fmt.Errorf("projections: encoding snapshot: %w", err)
	}
	return sp.n, nil
}

// spiller hands an encoding buffer's bytes to its sink once it holds
// snapshotSpill of them, so that the buffer is reused instead of grown. The
// first error of the sink sticks: every later spill drops its bytes.
type spiller struct {
	sink io.Writer
	n    int64
	err  error
}

// spill flushes b when it holds snapshotSpill bytes, and returns what to
// append to next. A nil spiller keeps every byte.
func (sp *spiller) spill(b []byte) []byte {
	if sp == nil || len(b) < snapshotSpill {
		return b
	}
	sp.flush(b)
	return b[:0]
}

// flush writes b to the sink, unless an earlier write failed.
func (sp *spiller) flush(b []byte) {
	if sp.err != nil || len(b) == 0 {
		return
	}
	n, err := sp.sink.Write(b)
	sp.n += int64(n)
	sp.err = err
}

// snapshotSizeHint is a guess at the encoded size, so that the buffer is
// seldom copied while it grows.
func snapshotSizeHint(snap *snapshot) int {
	n := 1024
	for i := range snap.Runs {
		sr := &snap.Runs[i]
		n += 512 + 400*(len(sr.Tasks)+len(sr.Delegations)+len(sr.Accounts)+sr.messageCount())
		for j := range sr.messageCount() {
			n += len(sr.message(j).Body)
		}
	}
	return n
}

// toSnapshot collects the state's primary records in its own order; the
// records are s's own.
func toSnapshot(s *State) snapshot { return snapshotOf(s, snapshotRunOf) }

// snapshotOf collects the state's primary records in its own order, each
// hot run's as hot says. The runs are listed by creation ordinal as s.order
// keeps them (runorder.go), not sorted: the copy is made under the engine's
// read lock, and sorting 10,000 runs in memory held it 7.5 to 18 ms.
func snapshotOf(s *State, hot func(*runState) snapshotRun) snapshot {
	n := len(s.runs) + len(s.cold)
	snap := snapshot{Position: s.Position, Config: s.config, RunCount: s.nruns, Ords: make([]int, 0, n),
		Runs: make([]snapshotRun, 0, n)}
	if s.store != nil && s.store.ViewsMissing() > 0 { // NB: none encodes as nil, with a store or without
		snap.MissingViews = s.store.missingIDs()
	}
	for _, e := range s.order {
		if r := s.runs[e.id]; r != nil {
			snap.Ords = append(snap.Ords, r.ord)
			snap.Runs = append(snap.Runs, hot(r))
			continue
		}
		cr := s.cold[e.id]
		if cr == nil {
			continue // the entry of a run that left memory (leftMemory)
		}
		sr := snapshotRun{Run: &cr.run, Last: cr.last, Cold: true,
			NoView: s.store != nil && s.store.viewMissing(e.id)}
		if cr.orch != nil {
			sr.Credentials = []*Credential{cr.orch}
		}
		snap.Ords = append(snap.Ords, cr.ord)
		snap.Runs = append(snap.Runs, sr)
	}
	return snap
}

// snapshotRunOf is hot run r's record in a snapshot: its primary records,
// in its own order.
func snapshotRunOf(r *runState) snapshotRun {
	return snapshotRun{
		Run:          &r.run,
		Last:         r.last,
		Tasks:        inOrder(r.taskOrder, r.tasks),
		Delegations:  inOrder(r.delOrder, r.dels),
		Accounts:     inOrder(r.accountOrder, r.accounts),
		RootSpent:    r.rootSpent,
		msgs:         &r.msgs,
		Asks:         inOrder(r.askOrder, r.asks),
		Credentials:  inOrder(r.credOrder, r.creds),
		Jobs:         inOrder(r.jobOrder, r.jobs),
		RevokedRoots: r.roots,
	}
}

// copySnapshotRun is snapshotRunOf over copies of r's records: the copies
// of each kind in one slab, in the run's own order, deep as the run's clone
// copies them (runState.clone), without the maps and indexes a run keeps
// (but a job's own lookups, which its clone rebuilds: jobs are few).
func copySnapshotRun(r *runState) snapshotRun {
	run, msgs := r.run.clone(), r.msgs.clone()
	sr := snapshotRun{
		Run:         &run,
		Last:        r.last,
		Tasks:       copyInOrder(r.taskOrder, r.tasks, (*Task).cloneValue),
		Delegations: copyInOrder(r.delOrder, r.dels, func(d *Delegation) Delegation { return *d }),
		Accounts:    cloneInOrder(r.accountOrder, r.accounts, (*Account).clone),
		RootSpent:   r.rootSpent,
		msgs:        &msgs,
		Asks:        cloneInOrder(r.askOrder, r.asks, (*Ask).clone),
		Credentials: copyInOrder(r.credOrder, r.creds, func(c *Credential) Credential { return *c }),
		Jobs:        cloneInOrder(r.jobOrder, r.jobs, (*Job).clone),
	}
	if r.roots != nil {
		sr.RevokedRoots = &RevokedRoots{Roots: cloneSlice(r.roots.Roots), Saturated: r.roots.Saturated}
	}
	return sr
}

// copyInOrder is inOrder over copies of m's values made by cp, held in one
// slab.
func copyInOrder[V any](order []string, m map[string]*V, cp func(*V) V) []*V {
	slab := make([]V, len(order))
	out := make([]*V, len(order))
	for i, k := range order {
		slab[i] = cp(m[k])
		out[i] = &slab[i]
	}
	return out
}

// cloneInOrder is inOrder over clones of m's values.
func cloneInOrder[V any](order []string, m map[string]*V, clone func(*V) *V) []*V {
	out := make([]*V, len(order))
	for i, k := range order {
		out[i] = clone(m[k])
	}
	return out
}

// messageCount is how many messages sr holds: its log's, else Messages'.
func (sr *snapshotRun) messageCount() int {
	if sr.msgs != nil {
		return sr.msgs.Len()
	}
	return len(sr.Messages)
}

// message is sr's i'th message, 0 ≤ i < messageCount().
func (sr *snapshotRun) message(i int) *Message {
	if sr.msgs != nil {
		return sr.msgs.At(i)
	}
	return &sr.Messages[i]
}

// noMessages is whether sr's messages encode as nil, as msgpack encodes a
// nil slice: a log with none does.
func (sr *snapshotRun) noMessages() bool {
	if sr.msgs != nil {
		return sr.msgs.Len() == 0
	}
	return sr.Messages == nil
}

// inOrder is m's values in the order of its keys in order.
func inOrder[K comparable, V any](order []K, m map[K]V) []V {
	out := make([]V, 0, len(order))
	for _, k := range order {
		out = append(out, m[k])
	}
	return out
}

// DecodeSnapshot rebuilds a State from EncodeSnapshot's bytes. It never
// panics: bad bytes, another format version or records that contradict each
// other give an error wrapping ErrBadSnapshot. b is not retained.
func DecodeSnapshot(b []byte) (s *State, err error) {
	s, _, err = decodeSnapshot(b)
	return s, err
}

// decodeSnapshot is DecodeSnapshot, returning also the state's
// SnapshotRecords, counted while the runs are added (LoadTiered needs it,
// and the decoder has every run in hand: no second walk over them).
func decodeSnapshot(b []byte) (s *State, records int64, err error) {
	defer func() {
		// Belt and braces: the fast path bounds every allocation by the
		// bytes left, and checkMsgpack does before reflection; anything
		// else either might panic on becomes an error.
		if r := recover(); r != nil {
			s, records, err = nil, 0, fmt.Errorf("%w: decoder panic: %v", ErrBadSnapshot, r)
		}
	}()
	// The fast path first (snapshot_decode.go), as for a view.
	snap, err := decodeVersioned(b, decodeSnapshotFields)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	s, records, err = fromSnapshot(snap)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	return s, records, nil
}

// fromSnapshot rebuilds the state with the fold's own helpers, refusing
// missing or duplicate records so that no later Apply or query can meet a
// nil or an index that points nowhere, and counts its SnapshotRecords as
// it goes (each record is added once: a duplicate is refused).
func fromSnapshot(snap *snapshot) (_ *State, records int64, _ error) {
	s := New()
	s.Position = snap.Position
	s.config = snap.Config
	if len(snap.Ords) != len(snap.Runs) || snap.RunCount < len(snap.Runs) || snap.RunCount > maxOrd {
		return nil, 0, fmt.Errorf("%d runs listed with %d ordinals, of %d runs", len(snap.Runs), len(snap.Ords),
			snap.RunCount)
	}
	for i, ord := range snap.Ords {
		if ord < 0 || ord >= snap.RunCount || (i > 0 && ord <= snap.Ords[i-1]) {
			return nil, 0, fmt.Errorf("run %d: ordinal %d out of order", i, ord)
		}
	}
	s.noViews = snap.MissingViews
	for i := range snap.Runs {
		sr := &snap.Runs[i]
		if sr.Run == nil || s.runs[sr.Run.RunID] != nil || s.cold[sr.Run.RunID] != nil {
			return nil, 0, fmt.Errorf("run %d missing or duplicate", i)
		}
		if sr.Cold {
			if !sr.Run.Status.Stale() {
				return nil, 0, fmt.Errorf("run %s: cold but not ended", sr.Run.RunID)
			}
			cr := &coldRun{run: *sr.Run, last: sr.Last, ord: snap.Ords[i], noView: sr.NoView}
			for _, c := range sr.Credentials {
				if c == nil || c.Key != events.OrchestratorKey || c.RunID != sr.Run.RunID || cr.orch != nil {
					return nil, 0, fmt.Errorf("run %s: cold with a credential other than its orchestrator's",
						sr.Run.RunID)
				}
				cr.orch = c
			}
			s.cold[sr.Run.RunID] = cr
			records++
			continue
		}
		if err := addSnapshotRun(s, sr); err != nil {
			return nil, 0, err
		}
		r := s.runs[sr.Run.RunID]
		records += r.snapshotRecords()
		r.ord = snap.Ords[i]
	}
	s.nruns = snap.RunCount
	// NB: addRun entered each hot run at the ordinal it gave it, not the snapshot's; the runs are listed in order.
	s.order = s.order[:0]
	for i := range snap.Runs {
		s.order = append(s.order, orderedRun{snap.Ords[i], snap.Runs[i].Run.RunID})
	}
	return s, records, nil
}

// unsaturatedTasks is how many tasks a run's use of its budget (Run.BudgetUsed) sums before it may saturate: each
// counts at most three counters of events.MaxUsageTokens.
const unsaturatedTasks = math.MaxInt64 / (3 * events.MaxUsageTokens)

// addSnapshotRun adds the hot run of sr to s with the fold's own helpers,
// refusing missing or duplicate records. It takes sr's records over (they
// are freshly decoded).
func addSnapshotRun(s *State, sr *snapshotRun) error {
	r := newRunState(*sr.Run)
	// NB: the maps are sized up front, as clone sizes them: the view of a
	// long run holds thousands of records, and a map filled one insert at
	// a time rehashes as it grows, on every first read of a finished run
	// and every snapshot's load.
	r.tasks = make(map[string]*Task, len(sr.Tasks))
	r.dels = make(map[string]*Delegation, len(sr.Delegations))
	r.accounts = make(map[string]*Account, len(sr.Accounts))
	r.msgIndex = make(map[string]int, len(sr.Messages))
	s.addRun(r, sr.Last)
	var used int64
	for _, t := range sr.Tasks {
		if t == nil || r.tasks[t.TaskID] != nil {
			return fmt.Errorf("run %s: task missing or duplicate", r.run.RunID)
		}
		t.Allocation = nil // derived from the ledger by queries
		r.addTask(t)
		used = SaturatingAdd(used, t.Usage.Budgeted())
	}
	// NB: the fold keeps the run's use the sum of what its tasks' last reports count (Usage.Budgeted), which never
	// saturates short of unsaturatedTasks tasks. One written before each counter was held to its bound kept the sum
	// of the counters as a log recorded them (a negative one, from an import before the check, or a damaged log): a
	// use the fold from position 1 no longer gives, so it is refused and the state rebuilt.
	if len(sr.Tasks) <= unsaturatedTasks && used != r.run.BudgetUsed {
		return fmt.Errorf("run %s: budget use %d, where its tasks' reports count %d", r.run.RunID,
			r.run.BudgetUsed, used)
	}
	for _, d := range sr.Delegations {
		if d == nil || r.dels[d.SubID] != nil {
			return fmt.Errorf("run %s: delegation missing or duplicate", r.run.RunID)
		}
		r.dels[d.SubID] = d
		r.delOrder = append(r.delOrder, d.SubID)
		if !d.Status.Terminal() {
			// NB: the slot pool is keyed by subId, and one holds a slot for one run at a time (an import may not
			// admit a subId another run holds). A settled delegation holds none, so its subId may be another run's
			// since: an import chooses its own.
			if _, held := s.held[d.SubID]; held {
				return fmt.Errorf("run %s: delegation %s holds a slot another run holds", r.run.RunID, d.SubID)
			}
			r.inFlight = append(r.inFlight, d.SubID)
			r.holdWorkerSlot(d.ShareHolder, 1)
			holdSlot(s, r.run.RunID, d.SubID)
		}
	}
	for _, a := range sr.Accounts {
		if a == nil || r.accounts[a.TaskID] != nil {
			return fmt.Errorf("run %s: account missing or duplicate", r.run.RunID)
		}
		r.addAccount(a)
	}
	r.rootSpent = sr.RootSpent
	for i := range sr.Messages {
		m := &sr.Messages[i]
		if _, dup := r.msgIndex[m.ID]; dup {
			return fmt.Errorf("run %s: duplicate message %q", r.run.RunID, m.ID)
		}
		r.indexMessage(i, m)
	}
	// The log takes the decoded messages over rather than copying them one
	// by one (addMessage without the copy).
	r.msgs = messageLogOver(sr.Messages)
	for _, a := range sr.Asks {
		if a == nil || r.asks[a.QuestionID] != nil {
			return fmt.Errorf("run %s: ask missing or duplicate", r.run.RunID)
		}
		r.addAsk(a)
	}
	for _, c := range sr.Credentials {
		if c == nil || r.creds[c.Key] != nil {
			return fmt.Errorf("run %s: credential missing or duplicate", r.run.RunID)
		}
		r.addCredential(c)
	}
	for _, j := range sr.Jobs {
		if j == nil || r.jobs[j.JobID] != nil {
			return fmt.Errorf("run %s: job missing or duplicate", r.run.RunID)
		}
		for _, q := range j.Requests {
			if q == nil {
				return fmt.Errorf("run %s: job %s: request missing", r.run.RunID, j.JobID)
			}
		}
		// NB: the grant's lists are read index for index (query.job's grant, a revalidation).
		if len(j.Fingerprints) != len(j.Tools) || len(j.Callables) != len(j.Tools) {
			return fmt.Errorf("run %s: job %s: %d tools with %d fingerprints and %d callables", r.run.RunID, j.JobID,
				len(j.Tools), len(j.Fingerprints), len(j.Callables))
		}
		r.addJob(j)
		if len(j.seen) != len(j.Requests) {
			return fmt.Errorf("run %s: job %s: duplicate request", r.run.RunID, j.JobID)
		}
	}
	if sr.RevokedRoots != nil {
		r.roots = &RevokedRoots{Roots: sr.RevokedRoots.Roots, Saturated: sr.RevokedRoots.Saturated}
		r.roots.index()
	}
	return nil
}

// SnapshotRecords is how many records a snapshot of s holds: each hot
// run's record, each cold run's summary still held in memory (those in the
// index are not in the snapshot), and every record of a hot run
// (tasks, delegations, accounts, messages, asks, credentials, jobs and the
// calls each job has seen). It is the snapshot's cost in the unit the
// engine compares with the events written since (commands/snapshot.go):
// encoding a record and decoding it at start-up cost about what folding an
// event does. NB: a job's calls are records like a run's messages (as many
// as the config's proxyMaxRequests a job). One walk over the runs and their
// jobs, no allocation (at start-up the decoder counts it instead).
func (s *State) SnapshotRecords() int64 {
	n := int64(len(s.cold))
	for _, r := range s.runs {
		n += r.snapshotRecords()
	}
	return n
}

// snapshotRecords is how many records r is in a snapshot (State.SnapshotRecords): its own, and each of its tasks,
// delegations, accounts, messages, questions, credentials, jobs and calls its jobs have seen.
func (r *runState) snapshotRecords() int64 {
	n := 1 + int64(len(r.tasks)+len(r.dels)+len(r.accounts)+r.msgs.Len()+len(r.asks)+len(r.creds)+len(r.jobs))
	for _, j := range r.jobs {
		n += int64(len(j.Requests))
	}
	return n
}
