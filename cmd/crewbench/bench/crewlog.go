package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// engineStore is crewlog in-process: commands.Engine on an eventlog.Log on
// the real disk, driven with Submit like the broker does.
//
// NB: crewlog's slot pool is daemon-wide (SPEC §1), the alternatives' is per
// run. The check keeps one run's delegations in flight at a time and the timed
// cells never hold more than one delegation per client (capacity 64), so the
// two rules decide alike in every workload crewbench runs.
type engineStore struct {
	dir string
	log *eventlog.Log
	eng *commands.Engine
	// withIDs sends a commandId with every workload command, as a runtime
	// that retries safely does, so the engine pays for the outcome it
	// records and the lookup of earlier ones.
	withIDs bool
	// stop, when set, closes what the store runs on besides the engine and
	// the log (a cluster node, NATS), before them.
	stop func()
}

var (
	orchestrator = events.Actor{Role: events.RoleOrchestrator}
	worker       = events.Actor{Role: events.RoleWorker, TaskID: parentTask}
)

func openEngineStore(dir string, slots int, withIDs bool) (*engineStore, error) {
	l, err := eventlog.Open(filepath.Join(dir, "crewlog"), nil)
	if err != nil {
		return nil, err
	}
	cfg := benchConfig(slots)
	// NB: the engine's defaults otherwise, as crewd opens it (its clock's tick, retention, snapshots, linger).
	e, err := commands.Open(l, commands.Options{Config: &cfg})
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	return &engineStore{dir: dir, log: l, eng: e, withIDs: withIDs}, nil
}

// benchConfig is the engine config every crewlog implementation runs.
func benchConfig(slots int) projections.Config {
	cfg := projections.DefaultConfig()
	cfg.MaxSlots = slots
	// The implementations compared decide pi-crew's policy, which has no slot shares: crewlog's fair slots are
	// off here so that all of them make the same decisions.
	cfg.SlotShare = 0
	// A cell writes all its clients' admissions into one run, and the run's events and text quotas (a million
	// events, 256 MiB by default) would refuse them after some 12 seconds at 64 clients: the alternatives have no
	// such quota, so crewlog's are set where no window reaches them, and still checked for every command.
	cfg.QuotaEvents, cfg.QuotaBytes = benchQuota, benchQuota
	// crewd's shares of one worker, so that every admission (a worker's) pays for their checks as under crewd.
	cfg.QuotaWorkerMsgShare, cfg.QuotaWorkerShare = projections.DefaultQuotaWorkerMsgShare,
		projections.DefaultQuotaWorkerShare
	// crewd's rules of a worker's shares (--share-by-delegator, --worker-slot-share); the slot rule stays off
	// with the run's, as SlotShare is 0.
	cfg.ShareByDelegator, cfg.WorkerSlotShare = true, true
	// The rest as crewd ships it (TestBenchConfigIsCrewdsDefaults): its depth, which the workload's delegations
	// (depth 2) reach, the run's reserve of its quotas for its orchestrator, the settlement's check of its
	// parent's attempt, and no wait methods. DefaultConfig is what a log holds before its first engine.configured.
	cfg.MaxDepth, cfg.QuotaReserve, cfg.RerouteEndedAttempts, cfg.WaitMethodsEnabled = benchMaxDepth,
		projections.DefaultQuotaReserve, true, false
	return cfg
}

// benchMaxDepth is crewd's --max-depth, which every implementation records in a decision's policy.
const benchMaxDepth = 2

// benchQuota is the events and the bytes quota of a run in crewbench, the largest crewd takes (--quota-events,
// --quota-bytes): a quarter of an hour of a million admissions a second, each some ten events and a kilobyte of
// text, stays under it.
const benchQuota = 1 << 40

func (s *engineStore) do(ctx context.Context, actor events.Actor, c commands.Command) (commands.Reply, error) {
	return s.submit(ctx, commands.Request{Actor: actor, Command: c})
}

// doWithID submits c with a fresh commandId of principal when the store
// sends ids.
func (s *engineStore) doWithID(ctx context.Context, p events.Principal, actor events.Actor,
	c commands.Command) (commands.Reply, error) {
	req := commands.Request{Actor: actor, Command: c}
	if s.withIDs {
		req.Principal, req.CommandID = p, newCommandID()
	}
	return s.submit(ctx, req)
}

func (s *engineStore) submit(ctx context.Context, req commands.Request) (commands.Reply, error) {
	c := req.Command
	r, err := s.eng.Submit(ctx, req)
	if err == nil && r.Rejected != nil && c.Kind() != "delegate.request" {
		err = fmt.Errorf("bench: %s: %w", c.Kind(), r.Rejected)
	}
	return r, err
}

// setupEngineRuns creates each run with its running parent task.
func setupEngineRuns(ctx context.Context, e *engineStore, runs []string, spec Spec) error {
	for _, r := range runs {
		for _, c := range []commands.Command{
			&commands.RunCreate{RunID: r, Team: "bench", Goal: "benchmark", Cwd: "/w", BudgetTotal: new(spec.Budget)},
			&commands.RunTransition{RunID: r, To: "running"},
			&commands.TaskCreate{RunID: r, TaskID: parentTask, Role: "executor", Agent: "a", Title: "work", Cwd: "/w",
				StepID: "work", Model: "anthropic/m1"},
			&commands.TaskTransition{RunID: r, TaskID: parentTask, To: "running"},
		} {
			if _, err := e.do(ctx, orchestrator, c); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *engineStore) Setup(ctx context.Context, runs []string, spec Spec) error {
	return setupEngineRuns(ctx, s, runs, spec)
}

func (s *engineStore) Admit(ctx context.Context, run string, tokens int64) (Admission, error) {
	desc := delegateDesc
	r, err := s.doWithID(ctx, events.WorkerPrincipal(run, parentTask), worker,
		&commands.DelegateRequest{RunID: run, TaskID: parentTask, Prompt: delegatePrompt,
			Description: &desc, BudgetTokens: &tokens})
	if err != nil {
		return Admission{}, err
	}
	if r.Rejected != nil {
		return Admission{Reason: r.Rejected.Reason}, nil
	}
	// An in-process caller takes the result as it was before it was
	// encoded; a replay (a retry answered from its outcome) carries the
	// JSON only.
	if v, ok := r.Value.(*commands.DelegateResult); ok {
		return Admission{SubID: v.GrandchildTaskRef}, nil
	}
	var res commands.DelegateResult
	if err := json.Unmarshal(r.Result, &res); err != nil {
		return Admission{}, fmt.Errorf("bench: delegate result: %w", err)
	}
	return Admission{SubID: res.GrandchildTaskRef}, nil
}

func (s *engineStore) Settle(ctx context.Context, run, subID, outcome string) error {
	_, err := s.doWithID(ctx, events.OrchestratorPrincipal(run), orchestrator,
		&commands.DelegateSettle{RunID: run, SubID: subID, Outcome: outcome, Text: resultText})
	return err
}

func (s *engineStore) Final(context.Context) (map[string]Final, error) {
	return logFinal(s.log)
}

// logFinal reads every run's events back from the log.
func logFinal(l *eventlog.Log) (map[string]Final, error) {
	f := newFinals()
	it := l.Read(1)
	for it.Next() {
		ev := it.Event()
		p, err := events.DecodePayload(ev.Type, ev.SchemaVersion, ev.Payload)
		if err != nil {
			return nil, errors.Join(err, it.Close())
		}
		f.add(ev.Stream, ev.Type, p)
	}
	return f.result(), errors.Join(it.Err(), it.Close())
}

// Commits counts the engine's committed groups.
func (s *engineStore) Commits() int64 { return int64(s.eng.Stats().Groups) }

// SyncShare is the engine's pipeline depth: a group is handed to the log
// while the one before waits for its sync, and one WAL sync may make both
// durable.
func (s *engineStore) SyncShare() int64 { return int64(s.eng.PipelineDepth()) }

func (s *engineStore) Close() error {
	if s.stop != nil {
		s.stop()
	}
	return errors.Join(s.eng.Close(), s.log.Close())
}
