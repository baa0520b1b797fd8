package projections

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/crewlog/crewlog/events"
)

// RunStatus is a status of the D§2.2 run machine.
type RunStatus string

// Run statuses (D§2.2). A run starts queued.
const (
	RunQueued    RunStatus = "queued"
	RunPlanning  RunStatus = "planning"
	RunRunning   RunStatus = "running"
	RunBlocked   RunStatus = "blocked"
	RunCompleted RunStatus = "completed"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
)

// Stale reports whether worker credentials of a run in this status are
// refused (the broker's set: completed, failed, cancelled; blocked is
// recoverable and deliberately excluded).
func (st RunStatus) Stale() bool {
	return st == RunCompleted || st == RunFailed || st == RunCancelled
}

// Run is the read model of a run: its manifest fields, status and budget use.
// Times are unix milliseconds of event times.
type Run struct {
	RunID    string    `json:"runId" msgpack:"runId"`
	Team     string    `json:"team" msgpack:"team"`
	Workflow string    `json:"workflow" msgpack:"workflow"`
	Goal     string    `json:"goal" msgpack:"goal"`
	Cwd      string    `json:"cwd" msgpack:"cwd"`
	Status   RunStatus `json:"status" msgpack:"status"`
	// Summary and Reason come from the last run.<status> event.
	Summary string `json:"summary,omitempty" msgpack:"summary"`
	Reason  string `json:"reason,omitempty" msgpack:"reason"`
	// BudgetTotal, BudgetWarning and BudgetAbort are nil when the run left
	// them unset (see events.RunCreated); a defined 0 is kept. NB: the
	// pointers are shared by clones and never written through.
	BudgetTotal     *int64   `json:"budgetTotal,omitempty" msgpack:"budgetTotal"`
	BudgetUnlimited bool     `json:"budgetUnlimited,omitempty" msgpack:"budgetUnlimited"`
	BudgetWarning   *float64 `json:"budgetWarning,omitempty" msgpack:"budgetWarning"`
	BudgetAbort     *float64 `json:"budgetAbort,omitempty" msgpack:"budgetAbort"`
	// BudgetUsed is Σ over the run's tasks of usage input+output+cacheWrite
	// (what run budget enforcement counts, D§4.4), kept incrementally.
	BudgetUsed    int64      `json:"budgetUsed" msgpack:"budgetUsed"`
	BudgetWarned  bool       `json:"budgetWarned,omitempty" msgpack:"budgetWarned"`
	BudgetAborted bool       `json:"budgetAborted,omitempty" msgpack:"budgetAborted"`
	WaitState     *WaitState `json:"waitState,omitempty" msgpack:"waitState"`
	CreatedAt     int64      `json:"createdAt" msgpack:"createdAt"`
	UpdatedAt     int64      `json:"updatedAt" msgpack:"updatedAt"`
	// Usage is what the run quotas and fair slots count, folded from the
	// run's events. It is engine bookkeeping, not part of the wire shape.
	Usage RunUsage `json:"-" msgpack:"usage"`
}

// RunUsage is a run's counters for its quotas and the slot pool's fairness.
// Times are unix milliseconds of event times.
type RunUsage struct {
	// Events is the number of events in the run's stream.
	Events int64 `msgpack:"events"`
	// MsgBytes is Σ len(body)+len(subject) of the run's mailbox messages:
	// what the run's messages hold in memory.
	MsgBytes int64 `msgpack:"msgBytes"`
	// TextBytes is Σ events.TextBytes of the run's events: the strings
	// they record beside its messages' bodies and subjects. The bytes quota
	// counts MsgBytes + TextBytes. A run whose record an older crewd wrote
	// (a snapshot, a summary) keeps that crewd's count of the events folded
	// before it, and counts the events folded since as this build does.
	TextBytes int64 `msgpack:"textBytes,omitempty"`
	// SlotWaitAt is when the run was last refused a slot (slots-exhausted
	// or slot-share-exceeded) while it held fewer than its share, for a
	// request no later check refused as well (policy otherwise), cleared by
	// its next admission or its end.
	SlotWaitAt int64 `msgpack:"slotWaitAt"`
	// QuotaNotedAt is the time of the run's last run.quota_exceeded.
	QuotaNotedAt int64 `msgpack:"quotaNotedAt"`
	// EndedAt is the position of the run's last end (run.completed, failed or cancelled), kept when it is reopened:
	// a worker's connection bound before it has ended with it, whatever the run's status now (RunEndedAt).
	EndedAt uint64 `msgpack:"endedAt,omitempty"`
}

// Bytes is what the run's bytes quota counts: its messages' bodies and
// subjects and every other string its events record.
func (u RunUsage) Bytes() int64 { return u.MsgBytes + u.TextBytes }

// WaitState is the run's single "park" slot, set by ask.requested; the run
// status does not change while parked.
type WaitState struct {
	TaskID     string `json:"taskId" msgpack:"taskId"`
	QuestionID string `json:"questionId" msgpack:"questionId"`
	AskedAt    int64  `json:"askedAt" msgpack:"askedAt"`
}

// Budget returns the run's budgetTotal and whether it is defined.
func (r Run) Budget() (total int64, defined bool) {
	if r.BudgetTotal == nil {
		return 0, false
	}
	return *r.BudgetTotal, true
}

func (r Run) clone() Run {
	if r.WaitState != nil {
		w := *r.WaitState
		r.WaitState = &w
	}
	return r
}

func applyRunCreated(s *State, ev events.Event) {
	p := events.PayloadAs[events.RunCreated](ev)
	// NB: an indexed cold run was faulted in first (FaultIn)
	if p == nil || s.runs[ev.Stream] != nil || s.cold[ev.Stream] != nil {
		return
	}
	at := ev.UnixMilli()
	s.addRun(newRunState(Run{
		RunID:           ev.Stream,
		Team:            p.Team,
		Workflow:        p.Workflow,
		Goal:            p.Goal,
		Cwd:             p.Cwd,
		Status:          RunQueued,
		BudgetTotal:     p.BudgetTotal,
		BudgetUnlimited: p.BudgetUnlimited,
		BudgetWarning:   p.BudgetWarning,
		BudgetAbort:     p.BudgetAbort,
		CreatedAt:       at,
		UpdatedAt:       at,
		Usage:           RunUsage{Events: 1, TextBytes: events.TextBytes(ev)},
	}), ev.Position)
}

func (s *State) addRun(r *runState, last uint64) {
	r.ord, r.last = s.nruns, last
	s.nruns++
	s.runs[r.run.RunID] = r
	s.ordered(r.ord, r.run.RunID)
	s.trackHot(r)
}

func applyRun(r *runState, ev events.Event) {
	switch ev.Type {
	case events.TypeRunQueued:
		setRunStatus(r, RunQueued, (*events.RunStatusChanged)(events.PayloadAs[events.RunQueued](ev)))
	case events.TypeRunPlanning:
		setRunStatus(r, RunPlanning, (*events.RunStatusChanged)(events.PayloadAs[events.RunPlanning](ev)))
	case events.TypeRunRunning:
		setRunStatus(r, RunRunning, (*events.RunStatusChanged)(events.PayloadAs[events.RunRunning](ev)))
	case events.TypeRunBlocked:
		setRunStatus(r, RunBlocked, (*events.RunStatusChanged)(events.PayloadAs[events.RunBlocked](ev)))
	case events.TypeRunCompleted:
		setRunStatus(r, RunCompleted, (*events.RunStatusChanged)(events.PayloadAs[events.RunCompleted](ev)))
	case events.TypeRunFailed:
		setRunStatus(r, RunFailed, (*events.RunStatusChanged)(events.PayloadAs[events.RunFailed](ev)))
	case events.TypeRunCancelled:
		setRunStatus(r, RunCancelled, (*events.RunStatusChanged)(events.PayloadAs[events.RunCancelled](ev)))
	case events.TypeRunBudgetWarning:
		if events.PayloadAs[events.RunBudgetWarning](ev) != nil {
			r.run.BudgetWarned = true
		}
	case events.TypeRunBudgetAbort:
		if events.PayloadAs[events.RunBudgetAbort](ev) != nil {
			r.run.BudgetAborted = true
		}
	case events.TypeRunQuotaExceeded:
		if events.PayloadAs[events.RunQuotaExceeded](ev) != nil {
			r.run.Usage.QuotaNotedAt = ev.UnixMilli()
		}
	}
	switch ev.Type {
	case events.TypeRunCompleted, events.TypeRunFailed, events.TypeRunCancelled:
		r.run.Usage.EndedAt = ev.Position
	}
}

// RunEndedAt is the position of the last end of run runID (Usage.EndedAt), 0 when it never ended or is unknown (or
// its summary could not be read back: a cold run has ended, and its workers' credentials with it, whatever this
// says).
func (s *State) RunEndedAt(runID string) uint64 {
	if r, _ := s.runRecord(runID); r != nil {
		return r.Usage.EndedAt
	}
	return 0
}

func setRunStatus(r *runState, st RunStatus, p *events.RunStatusChanged) {
	if p == nil {
		return
	}
	r.run.Status = st
	r.run.Summary = p.Summary
	r.run.Reason = p.Reason
}

// Run returns the run runID.
func (s *State) Run(runID string) (Run, bool) {
	r, ok, _ := s.LookupRun(runID)
	return r, ok
}

// LookupRun is Run, with the error (ErrNotReadBack) met reading a cold run's summary from the log: such a run is
// not known to be unknown, and must not be answered as one.
func (s *State) LookupRun(runID string) (Run, bool, error) {
	r, err := s.runRecord(runID)
	if r == nil {
		return Run{}, false, err
	}
	return r.clone(), true, nil
}

// runRecord is the record of run runID, not a copy: a hot run's, or a cold run's summary. NB: not s.run: a cold
// run's record is its summary, with no read of its records from the log. nil when the run is unknown, or with the
// error (ErrNotReadBack) met reading the summary.
func (s *State) runRecord(runID string) (*Run, error) {
	if r := s.runs[runID]; r != nil {
		return &r.run, nil
	}
	cr, err := s.lookupCold(runID)
	if cr == nil {
		return nil, err
	}
	return &cr.run, nil
}

// RunStatus is Run(runID).Status without copying the run: the broker reads it before every request of a worker.
func (s *State) RunStatus(runID string) (RunStatus, bool) {
	st, ok, _ := s.LookupRunStatus(runID)
	return st, ok
}

// LookupRunStatus is RunStatus, with the error (ErrNotReadBack) met reading a cold run's summary from the log (see
// LookupRun).
func (s *State) LookupRunStatus(runID string) (RunStatus, bool, error) {
	r, err := s.runRecord(runID)
	if r == nil {
		return "", false, err
	}
	return r.Status, true, nil
}

// RunFilter selects a page of runs. Runs are listed in creation order
// (oldest first, or newest first with Newest), which is deterministic; runs
// are never removed, so a cursor stays valid while new runs are created.
type RunFilter struct {
	// Statuses keeps only runs in one of these statuses; empty keeps all.
	Statuses []RunStatus
	// Limit caps the page; 0 means no cap.
	Limit  int
	Newest bool
	// Cursor is NextCursor of the previous page; empty starts at the first.
	Cursor string
	// MaxScan bounds the runs the page looks at, those Statuses leaves out
	// included, but for the ended runs when Statuses names no ended status:
	// those are passed over, not looked at (Runs); 0 means no bound. A page
	// that has looked at MaxScan runs ends there, with the cursor of the
	// next run to look at, however few runs it holds: a status that matches
	// few of many cold runs would otherwise read the index of every run ever
	// created, under the read lock the publisher waits for, to answer a page
	// of none.
	MaxScan int
}

// RunPage is one page of runs; NextCursor is empty on the last page.
// Scanned is the runs the page looked at before NextCursor's (MaxScan at
// most).
type RunPage struct {
	Runs       []Run
	NextCursor string
	Scanned    int
	// IndexRead is the bytes of the runs' summaries (their ids and records) the page read from the store's index on
	// disk (runindex.go), those of runs memory holds again, the one past the page's last and the versions of them it
	// passed over (older ones, or later than the state's position) included: what it cost beyond the runs in memory,
	// which a reader paced by its reads is charged. Not part of the answer: a state that keeps the same summaries in
	// memory answers the same page reading none.
	IndexRead int
}

// ErrBadCursor is returned for a cursor that no query of this state made.
var ErrBadCursor = errors.New("projections: bad cursor")

// Runs returns a page of runs matching f. The hot runs and the cold ones
// whose summary is in memory are merged, by creation ordinal, with the
// summaries of the other cold runs, read from the store's index
// (runindex.go) as of s.Position: the same runs, in the same order, with
// the same cursors as if every summary were in memory.
func (s *State) Runs(f RunFilter) (RunPage, error) {
	n := s.nruns
	// The cursor is the creation ordinal of the next run to visit, so it
	// does not move when runs are created between two pages.
	from := 0
	if f.Newest {
		from = n - 1
	}
	if f.Cursor != "" {
		c, err := strconv.ParseUint(f.Cursor, 36, 32)
		if err != nil || c >= uint64(n) {
			return RunPage{}, fmt.Errorf("%w: %q", ErrBadCursor, f.Cursor)
		}
		from = int(c)
	}
	var page RunPage
	if n == 0 {
		return page, nil
	}
	// A cold run has ended: a filter of statuses none of which has ended
	// (the dashboard's active runs, the metrics) reads no index.
	ended := len(f.Statuses) == 0 || slices.ContainsFunc(f.Statuses, RunStatus.Stale)
	read, err := s.eachRun(from, f.Newest, ended, func(ord int, run *Run) bool {
		if !ended && run.Status.Stale() {
			// NB: not looked at, as a cold run is not: a page counts the same runs whichever of them memory holds.
			return true
		}
		if f.MaxScan > 0 && page.Scanned == f.MaxScan {
			page.NextCursor = strconv.FormatUint(uint64(ord), 36)
			return false
		}
		if statusIn(run.Status, f.Statuses) {
			if f.Limit > 0 && len(page.Runs) == f.Limit {
				page.NextCursor = strconv.FormatUint(uint64(ord), 36)
				return false
			}
			page.Runs = append(page.Runs, run.clone())
		}
		page.Scanned++
		return true
	})
	if err != nil {
		return RunPage{IndexRead: read}, err
	}
	page.IndexRead = read
	return page, nil
}

func statusIn(st RunStatus, set []RunStatus) bool {
	if len(set) == 0 {
		return true
	}
	for _, x := range set {
		if x == st {
			return true
		}
	}
	return false
}
