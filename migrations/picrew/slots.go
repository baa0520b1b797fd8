package picrew

import (
	"fmt"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// slotPool is what the one-shot import knows of the daemon-wide slot pool (D§5): which run's delegation in flight
// holds each subId, as the store holds them and as the import's runs planned so far add to it. NB: the pool is keyed
// by subId alone (crewlog mints its own), so an admission under a subId another run holds would take that run's slot
// and its settlement free it while the other run's delegation is still in flight, and a snapshot of two runs holding
// one subId is refused at load; crewd's import.append refuses such an admission (commands' admittedBefore), and the
// one-shot import leaves it out. A follower has none: its daemon decides.
type slotPool struct {
	l *eventlog.Log
	// held and inFlight are read from the store at the first admission asked about (loaded), then kept as the
	// import plans: held is subId → the run holding its slot, inFlight the (run, subId) delegations not settled.
	loaded   bool
	held     map[string]string
	inFlight map[[2]string]bool
	// err is the store's failure while reading it: the import stops with it.
	err error
}

func newSlotPool(l *eventlog.Log) *slotPool { return &slotPool{l: l} }

// holder is the run whose delegation in flight holds subId's slot, if any. NB: the first call reads every event of the
// store once (the delegate events decoded), so an import that admits nothing never reads it.
func (sp *slotPool) holder(subID string) (run string, ok bool) {
	if !sp.loaded {
		sp.load()
	}
	run, ok = sp.held[subID]
	return run, ok
}

// load folds the store's delegate events into the pool as projections fold them: an admission takes its subId's slot,
// and a run's first settlement of a delegation it admitted frees it.
func (sp *slotPool) load() {
	sp.loaded, sp.held, sp.inFlight = true, map[string]string{}, map[[2]string]bool{}
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
}

// admit notes that run's delegation subID holds its slot.
func (sp *slotPool) admit(run, subID string) {
	if sp.loaded {
		sp.held[subID] = run
		sp.inFlight[[2]string{run, subID}] = true
	}
}

// settle notes that run's delegation subID, if in flight, was settled: it frees its subId's slot.
func (sp *slotPool) settle(run, subID string) {
	if k := [2]string{run, subID}; sp.loaded && sp.inFlight[k] {
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
