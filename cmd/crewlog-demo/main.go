// Command crewlog-demo appends a few events to a crewlog event log, reads
// them back and verifies the store. It needs nothing but Go:
//
//	go run ./cmd/crewlog-demo            # a fresh store in a temporary directory
//	go run ./cmd/crewlog-demo -data DIR  # or a store of your choosing
package main

import (
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
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

	// A run and a delegation of their own at every run, so that the demo runs again on a store it wrote: a run's
	// create command is decided once, and a subId names one delegation store-wide (the slot pool is daemon-wide).
	id := strings.ToLower(rand.Text())
	run := fmt.Sprintf("team_%s_demo_%s", time.Now().UTC().Format("20060102150405"), id)
	sub := "gc-demo-" + id
	now := time.Now()
	var mkErr error
	// mk records a real payload, so the store is one every crewlog tool
	// (crewctl replay, verify) reads.
	mk := func(p any) eventlog.Event {
		typ, _ := events.TypeOf(p)
		b, err := events.EncodePayload(p)
		if err != nil && mkErr == nil {
			mkErr = err
		}
		return eventlog.Event{Stream: run, Type: typ, SchemaVersion: events.SchemaVersion(typ), Time: now.UnixNano(),
			ActorRole: events.RoleOrchestrator, Payload: b}
	}
	const task = "01_build"
	create := []eventlog.Event{
		mk(&events.RunCreated{Team: "demo", Goal: "show the log", Cwd: "/src", BudgetTotal: new(int64(100000))}),
		mk(&events.TaskCreated{TaskID: task, Role: "executor", Agent: "executor", Title: "build", Cwd: "/src",
			DependsOn: []string{}, StepID: "build", Kind: events.TaskKindWorkflow}),
	}
	delegate := []eventlog.Event{
		mk(&events.DelegateRequested{TaskID: task, SubID: sub, Role: "explorer"}),
		mk(&events.DelegateAdmitted{TaskID: task, SubID: sub, ChildDepth: 2, Role: "explorer", ReservedTokens: 20000,
			TimeoutSec: 900, Deadline: now.Add(900 * time.Second).UnixMilli(), Cwd: "/src", Title: "delegate: search",
			Prompt: "find X"}),
		mk(&events.BudgetReserved{TaskID: task, SubID: sub, Tokens: 20000, GrantedTokens: 100000}),
	}
	if mkErr != nil {
		return mkErr
	}
	// The run's orchestrator wrote them (the actor of every event): its
	// command ids are its own, the outcome table is keyed by both.
	orch := events.OrchestratorPrincipal(run).Key()
	first, err := l.Append(
		eventlog.Write{Principal: orch, CommandID: run + "-create",
			Expected: []eventlog.Expectation{{Stream: run, Version: eventlog.NoStream}}, Events: create},
		eventlog.Write{Principal: orch, CommandID: run + "-delegate", Events: delegate},
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
	o, err := l.Outcome(orch, run+"-delegate")
	if err != nil {
		return err
	}
	fmt.Printf("command %s: accepted=%v, events %d..%d\n", o.CommandID, o.Accepted(), o.First, o.First+o.Count-1)
	// The whole store: checksums, chain and index, and the domain
	// invariants over the decoded events.
	rep, err := audit.Verify(l, nil)
	if err != nil {
		return err
	}
	if len(rep.Check.Problems) > 0 {
		return fmt.Errorf("verify: %d problem(s), first: %+v", len(rep.Check.Problems), rep.Check.Problems[0])
	}
	fmt.Printf("verify: ok, head %d, %d streams, %d commands, invariants hold\n", rep.Store.Head, rep.Store.Streams, rep.Store.Commands)
	return nil
}
