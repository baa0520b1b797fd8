// Command crewlog-demo appends a few events to a crewlog event log, reads
// them back and verifies the store. It needs nothing but Go:
//
//	go run ./cmd/crewlog-demo            # a fresh store in a temporary directory
//	go run ./cmd/crewlog-demo -data DIR  # or a store of your choosing
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/crewlog/crewlog/eventlog"
)

func main() {
	data := flag.String("data", "", "store directory (default: a new temporary directory)")
	flag.Parse()
	if err := run(*data); err != nil {
		fmt.Fprintln(os.Stderr, "crewlog-demo:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "crewlog-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	l, err := eventlog.Open(dir, nil)
	if err != nil {
		return err
	}
	defer l.Close()

	run := fmt.Sprintf("team_%s_demo", time.Now().UTC().Format("20060102150405"))
	now := time.Now().UnixNano()
	mk := func(typ string) eventlog.Event {
		return eventlog.Event{Stream: run, Type: typ, SchemaVersion: 1, Time: now, ActorRole: "orchestrator"}
	}
	first, err := l.Append(
		eventlog.Write{CommandID: run + "-create", Expected: []eventlog.Expectation{{Stream: run, Version: eventlog.NoStream}},
			Events: []eventlog.Event{mk("run.created"), mk("task.created")}},
		eventlog.Write{CommandID: run + "-delegate", Events: []eventlog.Event{mk("delegate.requested"), mk("delegate.admitted"), mk("budget.reserved")}},
	)
	if err != nil {
		return err
	}
	fmt.Printf("appended 5 events from position %d to %s\n", first, dir)

	it := l.ReadStream(run, 1)
	for it.Next() {
		e := it.Event()
		fmt.Printf("  %4d  %s v%d  %-20s command=%s hash=%x…\n", e.Position, e.Stream, e.StreamVersion, e.Type, e.CommandID, e.Hash[:6])
	}
	if err := it.Close(); err != nil {
		return err
	}
	o, err := l.Outcome(run + "-delegate")
	if err != nil {
		return err
	}
	fmt.Printf("command %s: accepted=%v, events %d..%d\n", o.CommandID, o.Accepted(), o.First, o.First+o.Count-1)
	rep, err := l.Verify(nil)
	if err != nil {
		return err
	}
	fmt.Printf("verify: ok, head %d, %d streams, %d commands\n", rep.Head, rep.Streams, rep.Commands)
	return nil
}
