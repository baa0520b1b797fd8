package picrew

import (
	"errors"
	"fmt"
	"strings"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// slotPool is what the one-shot import knows of the delegations of the store, and of the daemon-wide slot pool
// (D§5): which run's delegation in flight holds each subId, as the store holds them and as the import's runs planned
// so far add to them. NB: the pool is keyed by subId alone (crewlog mints its own), so an admission under a subId
// another run holds would take that run's slot and its settlement free it while the other run's delegation is still
// in flight, and a snapshot of two runs holding one subId is refused at load; an admission of a subId its run
// admitted already, which the fold ignores, reserved its tokens again; and one whose subId names a workflow task of
// its run took that task for its shadow, which the delegation's settlement ended. crewd's import.append refuses each
// (commands' admittedBefore and workflowTask), and the one-shot import leaves them out. A follower has none: its
// daemon decides.
type slotPool struct {
	l *eventlog.Log
	// admitted, held, inFlight and workflow are read from the store at the first admission asked about (loaded), then
	// kept as the import plans: admitted are the (run, subId) delegations, held is subId → the run holding its
	// slot, inFlight the delegations not settled, workflow the (run, taskId) workflow tasks the store holds.
	loaded   bool
	admitted map[[2]string]bool
	held     map[string]string
	inFlight map[[2]string]bool
	workflow map[[2]string]bool
	// settled are the (run, subId) settlements planned before the pool was read, which the store may not hold yet
	// (the run planning them is appended after, a dry run never): folded in after the store.
	settled [][2]string
	// err is the store's failure while reading it: the import stops with it.
	err error
}

func newSlotPool(l *eventlog.Log) *slotPool { return &slotPool{l: l} }

// subIDTaken is why an admission may not take a subId (slotPool.taken).
type subIDTaken int

const (
	subIDFree         subIDTaken = iota
	subIDHeld                    // another run's delegation in flight holds its slot
	subIDAdmitted                // its run admitted it already
	subIDWorkflowTask            // it names a workflow task of its run, as the store holds it
)

// taken says why an admission of subID by run, under commandID, is not to be recorded, and names the run holding the
// slot (subIDHeld); subIDFree when it may be, or when the store holds commandID's write already (the same admission
// read again). NB: the first call that is not such a write reads every event of the store once (the task and
// delegate events decoded), so an import that admits nothing new never reads it.
func (sp *slotPool) taken(run, subID, commandID string) (holder string, why subIDTaken) {
	if sp.err != nil {
		return "", subIDFree
	}
	switch _, err := sp.l.Outcome(events.EnginePrincipal().Key(), commandID); {
	case err == nil:
		return "", subIDFree
	case !errors.Is(err, eventlog.ErrNotFound):
		sp.err = fmt.Errorf("picrew: run %s: %w", run, err)
		return "", subIDFree
	}
	if !sp.loaded {
		sp.load()
	}
	k := [2]string{run, subID}
	switch holder, held := sp.held[subID]; {
	case sp.workflow[k]:
		return "", subIDWorkflowTask
	case sp.admitted[k]:
		return "", subIDAdmitted
	case held:
		return holder, subIDHeld
	}
	return "", subIDFree
}

// load folds the store's delegate events into the pool as projections fold them (a run's first admission of a subId
// takes its slot, and the first settlement of a delegation in flight frees it), and notes its workflow tasks.
func (sp *slotPool) load() {
	sp.loaded, sp.admitted, sp.held, sp.inFlight = true, map[[2]string]bool{}, map[string]string{},
		map[[2]string]bool{}
	sp.workflow = map[[2]string]bool{}
	runs := map[string]string{}
	it := sp.l.ReadTransient(1)
	defer it.Close()
	for it.Next() {
		ev := it.Event()
		if ev.Type != events.TypeTaskCreated && !delegateSlotEvent(ev.Type) {
			continue
		}
		p, err := events.DecodePayload(ev.Type, ev.SchemaVersion, ev.Payload)
		if err != nil {
			sp.err = fmt.Errorf("picrew: reading the store's delegations: %w", err)
			return
		}
		// NB: a copy, one per run: the event, read transient, aliases the storage engine's memory until the next one,
		// and the pool keeps its run (the decoded payload is a copy already).
		run, ok := runs[ev.Stream]
		if !ok {
			run = strings.Clone(ev.Stream)
			runs[run] = run
		}
		if t, ok := p.(*events.TaskCreated); ok {
			if t.Kind != events.TaskKindShadow {
				sp.workflow[[2]string{run, t.TaskID}] = true
			}
		} else if sub, admitted := slotEventSubID(p); admitted {
			sp.admit(run, sub)
		} else {
			sp.settle(run, sub)
		}
	}
	if err := it.Err(); err != nil {
		sp.err = fmt.Errorf("picrew: reading the store's delegations: %w", err)
	}
	for _, k := range sp.settled {
		sp.settle(k[0], k[1])
	}
	sp.settled = nil
}

// admit notes run's admission of subID: its first takes subID's slot.
func (sp *slotPool) admit(run, subID string) {
	if k := [2]string{run, subID}; sp.loaded && !sp.admitted[k] {
		sp.admitted[k], sp.inFlight[k] = true, true
		sp.held[subID] = run
	}
}

// settle notes that run's delegation subID, if in flight, was settled: it frees its subId's slot.
func (sp *slotPool) settle(run, subID string) {
	k := [2]string{run, subID}
	switch {
	case !sp.loaded:
		sp.settled = append(sp.settled, k)
	case sp.inFlight[k]:
		delete(sp.inFlight, k)
		delete(sp.held, subID)
	}
}

// delegateSlotEvent reports whether events of type typ take or free a slot.
func delegateSlotEvent(typ string) bool {
	switch typ {
	case events.TypeDelegateAdmitted, events.TypeDelegateCompleted, events.TypeDelegateFailed,
		events.TypeDelegateTimedOut, events.TypeDelegateCancelled:
		return true
	}
	return false
}

// slotEventSubID is the subId of p, a payload of a delegateSlotEvent type, and whether it admits it (else it settles
// it).
func slotEventSubID(p any) (subID string, admitted bool) {
	switch d := p.(type) {
	case *events.DelegateAdmitted:
		return d.SubID, true
	case *events.DelegateCompleted:
		return d.SubID, false
	case *events.DelegateFailed:
		return d.SubID, false
	case *events.DelegateTimedOut:
		return d.SubID, false
	case *events.DelegateCancelled:
		return d.SubID, false
	}
	return "", false
}
