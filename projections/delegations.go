package projections

import (
	"slices"
	"strings"

	"github.com/crewlog/crewlog/events"
)

// DelegationStatus is the lifecycle of a delegation (SPEC §1):
// queued → running → completed / failed / timed_out / cancelled.
type DelegationStatus string

// Delegation statuses.
const (
	DelegationQueued    DelegationStatus = "queued"
	DelegationRunning   DelegationStatus = "running"
	DelegationCompleted DelegationStatus = "completed"
	DelegationFailed    DelegationStatus = "failed"
	DelegationTimedOut  DelegationStatus = "timed_out"
	DelegationCancelled DelegationStatus = "cancelled"
)

// Terminal reports whether the delegation has settled (its slot is free).
func (st DelegationStatus) Terminal() bool {
	return st != DelegationQueued && st != DelegationRunning
}

// taskStatus is the status the shadow task takes when its delegation does:
// the task machine has no timed_out, so a timed-out shadow task is failed.
func (st DelegationStatus) taskStatus() TaskStatus {
	switch st {
	case DelegationQueued:
		return TaskQueued
	case DelegationRunning:
		return TaskRunning
	case DelegationCompleted:
		return TaskCompleted
	case DelegationCancelled:
		return TaskCancelled
	}
	return TaskFailed
}

// Delegation is the read model of an admitted delegation (a grandchild).
// Rejected requests leave no delegation. Times are unix milliseconds.
type Delegation struct {
	RunID        string  `json:"runId" msgpack:"runId"`
	SubID        string  `json:"subId" msgpack:"subId"`
	ParentTaskID string  `json:"parentTaskId" msgpack:"parentTaskId"`
	Role         string  `json:"role" msgpack:"role"`
	Depth        int     `json:"depth" msgpack:"depth"`
	Model        string  `json:"model,omitempty" msgpack:"model"`
	TimeoutSec   float64 `json:"timeoutSec" msgpack:"timeoutSec"`
	Deadline     int64   `json:"deadline" msgpack:"deadline"`
	Cwd          string  `json:"cwd" msgpack:"cwd"`
	Title        string  `json:"title" msgpack:"title"`
	// ParentAttempt is the attempt of the parent task that made the delegation: the parent's Retries when it was
	// admitted. A retry since ended that attempt, and its result is not the new attempt's (RerouteEndedAttempts).
	ParentAttempt int              `json:"parentAttempt,omitempty" msgpack:"parentAttempt"`
	Metered       bool             `json:"metered" msgpack:"metered"`
	Reserved      int64            `json:"reservedTokens" msgpack:"reservedTokens"`
	Status        DelegationStatus `json:"status" msgpack:"status"`
	// CancelRequested is set by delegate.cancel_requested while in flight;
	// the runtime is expected to settle with cancelled.
	CancelRequested bool  `json:"cancelRequested,omitempty" msgpack:"cancelRequested"`
	PID             int   `json:"pid,omitempty" msgpack:"pid"`
	AdmittedAt      int64 `json:"admittedAt" msgpack:"admittedAt"`
	SettledAt       int64 `json:"settledAt,omitempty" msgpack:"settledAt"`
	// AdmittedPosition is the log position of delegate.admitted, whose
	// payload holds what the state does not keep (the prompt, maxTurns).
	AdmittedPosition uint64 `json:"admittedPosition" msgpack:"admittedPosition"`
	// Outcome details from the terminal event.
	OK          bool   `json:"ok,omitempty" msgpack:"ok"`
	UsageTokens int64  `json:"usageTokens,omitempty" msgpack:"usageTokens"`
	Expired     bool   `json:"expired,omitempty" msgpack:"expired"`
	MessageID   string `json:"messageId,omitempty" msgpack:"messageId"`
	// ShareHolder is the task whose share of the run's slots the delegation's slot counts for while in flight: the
	// parent task's share holder when it was admitted (shareHolder), kept so the count of each holder's slots
	// (runState.slotsHeld) is kept by admission and settlement alone. Engine bookkeeping, not part of the wire
	// shape.
	ShareHolder string `json:"-" msgpack:"shareHolder"`
}

func applyDelegation(s *State, r *runState, ev events.Event) {
	at := ev.UnixMilli()
	switch ev.Type {
	case events.TypeDelegateAdmitted:
		if p := events.PayloadAs[events.DelegateAdmitted](ev); p != nil && r.dels[p.SubID] == nil &&
			!heldByAnother(s, r, p.SubID) {
			d := admit(s, r, p, at, ev.Position)
			stopWaiting(s, r)
			workerAdmitted(r, d.ShareHolder)
		}
	case events.TypeDelegateRejected:
		// A request another check refuses as well (policy.otherwise) waits
		// for no slot: it could not use one.
		if p := events.PayloadAs[events.DelegateRejected](ev); p != nil &&
			(p.Reason == events.ReasonSlotsExhausted || p.Reason == events.ReasonSlotShareExceeded) &&
			(p.Policy == nil || p.Policy.Otherwise == "") {
			refusedSlot(s, r, at)
			refusedWorkerSlot(s, r, p.TaskID, at)
		}
	case events.TypeDelegateSpawned:
		p := events.PayloadAs[events.DelegateSpawned](ev)
		if p == nil {
			return
		}
		// Promotion only from queued: a late report after a terminal state
		// (or a second report) changes nothing.
		if d := r.dels[p.SubID]; d != nil && d.Status == DelegationQueued {
			d.Status = DelegationRunning
			d.PID = p.PID
			if t := r.tasks[p.SubID]; t != nil && t.Status == TaskQueued {
				r.setTaskStatus(t, TaskRunning)
			}
		}
	case events.TypeDelegateCancelRequested:
		if p := events.PayloadAs[events.DelegateCancelRequested](ev); p != nil {
			if d := r.dels[p.SubID]; d != nil && !d.Status.Terminal() {
				d.CancelRequested = true
			}
		}
	case events.TypeDelegateCompleted:
		settle(s, r, DelegationCompleted, (*events.DelegateSettled)(events.PayloadAs[events.DelegateCompleted](ev)),
			at)
	case events.TypeDelegateFailed:
		settle(s, r, DelegationFailed, (*events.DelegateSettled)(events.PayloadAs[events.DelegateFailed](ev)), at)
	case events.TypeDelegateTimedOut:
		settle(s, r, DelegationTimedOut, (*events.DelegateSettled)(events.PayloadAs[events.DelegateTimedOut](ev)), at)
	case events.TypeDelegateCancelled:
		settle(s, r, DelegationCancelled, (*events.DelegateSettled)(events.PayloadAs[events.DelegateCancelled](ev)),
			at)
	}
	// delegate.requested and delegate.rejected are audit records: a
	// rejection has no side effect on the delegations (D2), and requested
	// never stands alone. A refused slot only marks the run as waiting.
}

// heldByAnother reports whether subID holds a slot for a run other than r. NB: the slot pool is keyed by subId, a
// slot is one run's at a time, and no decision admits a subId another run holds (crewlog mints them from UUIDs, an
// import may not choose a held one): the fold ignores such an admission, as the snapshot's decoder refuses two runs
// holding one subId, where it moved the slot to the second run, whose settlement then freed the first run's.
func heldByAnother(s *State, r *runState, subID string) bool {
	holder, held := s.held[subID]
	return held && holder != r.run.RunID
}

// admit creates the delegation, its shadow task (D§2.5) and takes its slot, and returns the delegation. NB: it
// holds the delegation it creates rather than reading it back from r.dels: in a long run that map holds tens of
// thousands of entries, and a read of it is likely a cache miss.
func admit(s *State, r *runState, p *events.DelegateAdmitted, at int64, pos uint64) *Delegation {
	d := &Delegation{
		RunID:            r.run.RunID,
		SubID:            p.SubID,
		ParentTaskID:     p.TaskID,
		Role:             p.Role,
		Depth:            p.ChildDepth,
		Model:            p.Model,
		TimeoutSec:       p.TimeoutSec,
		Deadline:         p.Deadline,
		Cwd:              p.Cwd,
		Title:            p.Title,
		Metered:          p.Metered(),
		Reserved:         p.ReservedTokens,
		Status:           DelegationQueued,
		AdmittedAt:       at,
		AdmittedPosition: pos,
	}
	r.dels[p.SubID] = d
	if parent := r.tasks[p.TaskID]; parent != nil {
		d.ParentAttempt = parent.Retries
	}
	r.delOrder = append(r.delOrder, p.SubID)
	r.inFlight = append(r.inFlight, p.SubID)
	d.ShareHolder = r.shareHolder(p.TaskID)
	r.holdWorkerSlot(d.ShareHolder, 1)
	holdSlot(s, r.run.RunID, p.SubID)
	if r.tasks[p.SubID] != nil {
		return d
	}
	depth := p.ChildDepth
	if depth == 0 {
		depth = 2 // pi-crew's fallback for a missing childDepth
	}
	r.addTask(&Task{
		RunID:     r.run.RunID,
		TaskID:    p.SubID,
		Kind:      events.TaskKindShadow,
		Role:      p.Role,
		Agent:     events.DelegateAgent,
		Title:     p.Title,
		Status:    TaskQueued,
		Cwd:       p.Cwd,
		DependsOn: []string{},
		Depth:     depth,
		Model:     p.Model,
		CreatedAt: at,
		StartedAt: at,
	})
	return d
}

// settle applies a terminal delegate event: the first one wins (a terminal
// state is never left, D6), the slot frees, and the shadow task flips to the
// matching terminal status whatever it was ("terminal flips always win").
func settle(s *State, r *runState, st DelegationStatus, p *events.DelegateSettled, at int64) {
	if p == nil {
		return
	}
	d := r.dels[p.SubID]
	if d == nil || d.Status.Terminal() {
		return
	}
	d.Status = st
	d.SettledAt = at
	d.OK = p.OK
	d.UsageTokens = p.UsageTokens
	d.Expired = p.Expired
	d.MessageID = p.MessageID
	releaseSlot(s, p.SubID)
	r.inFlight = dropFrom(r.inFlight, func(sub string) bool { return sub == p.SubID })
	r.holdWorkerSlot(d.ShareHolder, -1)
	if t := r.tasks[p.SubID]; t != nil {
		r.setTaskStatus(t, st.taskStatus())
		t.FinishedAt = at
		t.Error = p.Error
	}
}

// Delegation returns delegation subID of run runID.
func (s *State) Delegation(runID, subID string) (Delegation, bool) {
	r := s.run(runID)
	if r == nil || r.dels[subID] == nil {
		return Delegation{}, false
	}
	return *r.dels[subID], true
}

// Delegations returns the delegations of run runID in admission order.
func (s *State) Delegations(runID string) []Delegation {
	p, _ := s.DelegationsPage(runID, PageFilter{})
	return p.Items
}

// EachInFlight calls fn with each of run runID's delegations in flight (not settled: queued or running) in
// admission order, until fn returns false. It walks only those, however many delegations the run has settled,
// and d is a copy. Decisions that act on the delegations in flight (a run's end, a budget abort) use it; a query
// returns Delegations' copies of them all.
func (s *State) EachInFlight(runID string, fn func(d Delegation) bool) {
	r := s.run(runID)
	if r == nil {
		return
	}
	for _, sub := range r.inFlight {
		if !fn(*r.dels[sub]) {
			return
		}
	}
}

// InFlight returns every delegation that holds a slot, daemon-wide, ordered
// by deadline then subId: the order in which the engine's clock expires
// them. Its size is bounded by the slot capacity.
func (s *State) InFlight() []Delegation {
	out := make([]Delegation, 0, len(s.held))
	for sub, run := range s.held {
		out = append(out, *s.runs[run].dels[sub])
	}
	slices.SortFunc(out, func(a, b Delegation) int {
		if a.Deadline != b.Deadline {
			if a.Deadline < b.Deadline {
				return -1
			}
			return 1
		}
		return strings.Compare(a.SubID, b.SubID)
	})
	return out
}
