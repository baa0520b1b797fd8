package picrew

import (
	"errors"
	"fmt"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// slotPool is what the one-shot import knows of the delegations of the store, and of the daemon-wide slot pool
// (D§5): which run's delegation in flight holds each subId, as the store holds them and as the import's runs planned so
// far add to them. NB: the pool is keyed by subId alone (crewlog mints its own), so an admission under a subId another
// run holds would take that run's slot and its settlement free it while the other run's delegation is still in
// flight, and a snapshot of two runs holding one subId is refused at load; and an admission of a subId its run
// admitted already, which the fold ignores, reserved its tokens again. crewd's import.append refuses both (commands'
// admittedBefore), and the one-shot import leaves them out. A follower has none: its daemon decides.
type slotPool struct {
	l *eventlog.Log
	// admitted, held and inFlight are read from the store at the first admission asked about (loaded), then kept as
	// the import plans: admitted are the (run, subId) delegations, held is subId → the run holding its slot, inFlight
	// the delegations not settled.
	loaded   bool
	admitted map[[2]string]bool
	held     map[string]string
	inFlight map[[2]string]bool
	// settled are the (run, subId) settlements planned before the pool was read, which the store may not hold yet
	// (the run planning them is appended after, a dry run never): folded in after the store.
	settled [][2]string
	// err is the store's failure while reading it: the import stops with it.
	err error
}

func newSlotPool(l *eventlog.Log) *slotPool { return &slotPool{l: l} }

// taken is the run whose delegation holds subID's slot, or has subID already when it is run: an admission of subID by
// run under commandID is not to be recorded (ok), unless the store holds commandID's write already (the same
// admission read again). NB: the first call that is not such a write reads every event of the store once (the
// delegate events decoded), so an import that admits nothing new never reads it.
func (sp *slotPool) taken(run, subID, commandID string) (holder string, ok bool) {
	if sp.err != nil {
		return "", false
	}
	switch _, err := sp.l.Outcome(events.EnginePrincipal().Key(), commandID); {
	case err == nil:
		return "", false
	case !errors.Is(err, eventlog.ErrNotFound):
		sp.err = fmt.Errorf("picrew: run %s: %w", run, err)
		return "", false
	}
	if !sp.loaded {
		sp.load()
	}
	if sp.admitted[[2]string{run, subID}] {
		return run, true
	}
	holder, ok = sp.held[subID]
	return holder, ok
}

// load folds the store's delegate events into the pool as projections fold them: a run's first admission of a subId
// takes its slot, and the first settlement of a delegation in flight frees it.
func (sp *slotPool) load() {
	sp.loaded, sp.admitted, sp.held, sp.inFlight = true, map[[2]string]bool{}, map[string]string{}, map[[2]string]bool{}
	it := sp.l.ReadTransient(1)
	defer it.Close()
	for it.Next() {
		ev := it.Event()
		if !delegateSlotEvent(ev.Type) {
			continue
		}
		p, err := events.DecodePayload(ev.Type, ev.SchemaVersion, ev.Payload)
		if err != nil {
			sp.err = fmt.Errorf("picrew: reading the store's delegations: %w", err)
			return
		}
		if sub, admitted := slotEventSubID(p); admitted {
			sp.admit(ev.Stream, sub)
		} else {
			sp.settle(ev.Stream, sub)
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
	case events.TypeDelegateAdmitted, events.TypeDelegateCompleted, events.TypeDelegateFailed, events.TypeDelegateTimedOut,
		events.TypeDelegateCancelled:
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
