package bench

import "fmt"

// Impl is one implementation compare can run.
type Impl struct {
	Name  string // the --only name
	Label string // what the table calls it
	open  func(dir string, spec Spec) (Store, error)
}

// Impls are the compared implementations, in the table's order.
var Impls = []Impl{
	{"file", "file append + fdatasync, group commit (physical limit)", func(dir string, _ Spec) (Store, error) {
		s, err := openRawFile(dir)
		if err != nil {
			return nil, err
		}
		return newGroupStore(s), nil
	}},
	{"pebble", "plain Pebble, synced batches, group commit", func(dir string, _ Spec) (Store, error) {
		s, err := openPebbleSink(dir)
		if err != nil {
			return nil, err
		}
		return newGroupStore(s), nil
	}},
	{"crewlog", "crewlog Engine in-process", func(dir string, spec Spec) (Store, error) { return openEngineStore(dir, spec.Slots) }},
	{"socket", "crewlog over the unix socket", func(dir string, spec Spec) (Store, error) { return openSocketStore(dir, spec.Slots) }},
	{"sqlite", "SQLite event store (WAL, synchronous=FULL)", func(dir string, _ Spec) (Store, error) { return openSQLiteStore(dir) }},
	{"jetstream", "NATS JetStream embedded (sync always)", func(dir string, _ Spec) (Store, error) { return openJetStreamStore(dir) }},
	{"picrew", "pi-crew files (run.lock, tasks.json, events.jsonl)", func(dir string, _ Spec) (Store, error) { return openPiCrewStore(dir) }},
}

// reference is the implementation the ratios are taken against.
const reference = "crewlog"

// selectImpls returns the implementations named in only (all when empty).
func selectImpls(only []string) ([]Impl, error) {
	if len(only) == 0 {
		return Impls, nil
	}
	var out []Impl
	for _, n := range only {
		found := false
		for _, im := range Impls {
			if im.Name == n {
				out, found = append(out, im), true
			}
		}
		if !found {
			return nil, fmt.Errorf("bench: unknown implementation %q (one of file, pebble, crewlog, socket, sqlite, jetstream, picrew)", n)
		}
	}
	return out, nil
}
