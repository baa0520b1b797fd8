package bench

import (
	"errors"
	"fmt"
	"strings"
)

// Impl is one implementation compare can run.
type Impl struct {
	Name  string // the --only name
	Label string // what the table calls it
	open  func(dir string, spec Spec) (Store, error)
	// Optional implementations run only when named in --only.
	Optional bool
	// InterleavedEvents marks an implementation whose decisions' events are
	// not written together (pi-crew appends each event on its own, after
	// the state file, D§3.5): the pre-check reports it instead of refusing it.
	InterleavedEvents bool
}

// group wraps a sink opener in the group committer.
func group[S sink](open func(dir string) (S, error)) func(string, Spec) (Store, error) {
	return func(dir string, _ Spec) (Store, error) {
		s, err := open(dir)
		if err != nil {
			return nil, err
		}
		return newGroupStore(s), nil
	}
}

// Impls are the compared implementations, in the table's order.
var Impls = []Impl{
	{Name: "file", Label: "preallocated file + fdatasync, group commit (physical limit)", open: group(openRawFile)},
	{Name: "pebble", Label: "plain Pebble, synced batches, group commit", open: group(openPebbleSink)},
	{Name: "crewlog", Label: "crewlog Engine in-process, a commandId per command",
		open: func(dir string, spec Spec) (Store, error) {
			return openEngineStore(dir, spec.Slots, true)
		}},
	{Name: "crewlog-noid", Label: "crewlog Engine in-process, no commandId", Optional: true,
		open: func(dir string, spec Spec) (Store, error) {
			return openEngineStore(dir, spec.Slots, false)
		}},
	{Name: "crewlog-jetstream-r1", Label: "crewlog writer on NATS JetStream R1 (sync always, loopback TCP), a " +
		"commandId per command", open: func(dir string, spec Spec) (Store, error) {
		return openClusterEngineStore(dir, spec.Slots, 1, false)
	}},
	{Name: "crewlog-jetstream-r3", Label: "crewlog writer on NATS JetStream R3 (3 servers, sync always, loopback " +
		"TCP), a commandId per command", open: func(dir string, spec Spec) (Store, error) {
		return openClusterEngineStore(dir, spec.Slots, 3, false)
	}},
	{Name: "crewlog-jetstream-r3-early", Label: "crewlog writer on NATS JetStream R3, each group published while " +
		"the one before is replicated, a commandId per command", Optional: true,
		open: func(dir string, spec Spec) (Store, error) {
			return openClusterEngineStore(dir, spec.Slots, 3, true)
		}},
	{Name: "socket", Label: "crewlog over the unix socket, a commandId per command",
		open: func(dir string, spec Spec) (Store, error) {
			return openSocketStore(dir, spec.Slots)
		}},
	{Name: "sqlite-group", Label: "SQLite (WAL, synchronous=FULL), group commit, one transaction per group",
		open: group(openSQLiteSink)},
	{Name: "sqlite-naive", Label: "SQLite (WAL, synchronous=FULL), one transaction per operation",
		open: func(dir string, _ Spec) (Store, error) {
			return openSQLiteStore(dir)
		}},
	{Name: "jetstream-group", Label: "NATS JetStream (sync always), group commit, one message per group",
		open: group(openJetStreamSink)},
	{Name: "jetstream-async", Label: "NATS JetStream (sync always), group commit, one async message per decision",
		Optional: true, open: group(openJetStreamAsyncSink)},
	{Name: "jetstream-naive", Label: "NATS JetStream (sync always), optimistic writers, one message per operation",
		open: func(dir string, _ Spec) (Store, error) {
			return openJetStreamStore(dir)
		}},
	{Name: "picrew", Label: "pi-crew's files (run.lock, tasks.json, mailbox, events.jsonl)", InterleavedEvents: true,
		open: func(dir string, _ Spec) (Store, error) {
			return openPiCrewStore(dir)
		}},
}

// errNoSuchImpl is an unknown implementation name.
var errNoSuchImpl = errors.New("bench: unknown implementation")

// reference is the implementation the ratios are taken against.
const reference = "crewlog"

// extraImpls are implementations only tests know (a store that skips its
// sync); implByName finds them too, so a pre-check child can run them.
var extraImpls []Impl

func implByName(name string) (Impl, bool) {
	for _, im := range append(Impls[:len(Impls):len(Impls)], extraImpls...) {
		if im.Name == name {
			return im, true
		}
	}
	return Impl{}, false
}

// selectImpls returns the implementations named in only (the non-optional
// ones when empty).
func selectImpls(only []string) ([]Impl, error) {
	var out []Impl
	if len(only) == 0 {
		for _, im := range Impls {
			if !im.Optional {
				out = append(out, im)
			}
		}
		return out, nil
	}
	for _, n := range only {
		im, ok := implByName(n)
		if !ok {
			return nil, fmt.Errorf("%w %q (one of %s)", errNoSuchImpl, n, strings.Join(implNames(), ", "))
		}
		out = append(out, im)
	}
	return out, nil
}

func implNames() []string {
	var n []string
	for _, im := range Impls {
		n = append(n, im.Name)
	}
	return n
}
