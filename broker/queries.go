package broker

import (
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Queries read the engine's published state (never undurable) and return copies. They are crewlog's methods for
// the runtime: the orchestrator of the run, or the admin naming params.runId; a worker is forbidden. query.runs
// spans every run, so only the admin may call it. Unknown params keys are refused.

// queryParams checks the caller and reads the run; extra reads happen before strict via read.
func queryParams(cl *call, read func(p *params)) (*params, string) {
	p := readParams(cl)
	if cl.c.id.role == events.RoleWorker {
		p.err = forbidden("%s requires an orchestrator or admin credential", cl.method)
		return p, ""
	}
	if read != nil {
		read(p)
	}
	runID := p.run(cl)
	p.strict()
	return p, runID
}

func readState[T any](cl *call, fn func(st *projections.State) T) T {
	var out T
	cl.c.s.eng.Read(func(st *projections.State) { out = fn(st) })
	return out
}

// query.run {} → the run.
func handleQueryRun(cl *call) (any, error) {
	p, runID := queryParams(cl, nil)
	if p.err != nil {
		return nil, p.err
	}
	return readState(cl, func(st *projections.State) projections.Run { r, _ := st.Run(runID); return r }), nil
}

type runsResult struct {
	Runs       []projections.Run `json:"runs"`
	NextCursor string            `json:"nextCursor,omitempty"`
}

// query.runs {status?: string|[string], limit? 1..1000 (default 100), cursor?, newest?} → {runs, nextCursor?}.
func handleQueryRuns(cl *call) (any, error) {
	p := readParams(cl)
	if cl.c.id.role != events.RoleAdmin {
		return nil, forbidden("%s requires the admin credential", cl.method)
	}
	var statuses []projections.RunStatus
	if v, ok := p.get("status"); ok {
		if v[0] == '"' {
			statuses = append(statuses, projections.RunStatus(p.str("status", true, 32)))
		} else {
			for _, s := range p.strs("status", 16, 32) {
				statuses = append(statuses, projections.RunStatus(s))
			}
		}
	}
	limit := int(p.int("limit", 1, 1000, 100))
	cursor := p.str("cursor", false, 64)
	newest := false
	if v, ok := p.get("newest"); ok {
		newest = string(v) == "true"
		if !newest && string(v) != "false" {
			p.fail("newest", "a boolean")
		}
	}
	p.strict()
	if p.err != nil {
		return nil, p.err
	}
	var (
		page projections.RunPage
		err  error
	)
	cl.c.s.eng.Read(func(st *projections.State) {
		page, err = st.Runs(projections.RunFilter{Statuses: statuses, Limit: limit, Newest: newest, Cursor: cursor})
	})
	if err != nil {
		return nil, err
	}
	if page.Runs == nil {
		page.Runs = []projections.Run{}
	}
	return runsResult{Runs: page.Runs, NextCursor: page.NextCursor}, nil
}

// query.tasks {} → {tasks} (shadow tasks included; allocations filled from the ledger).
func handleQueryTasks(cl *call) (any, error) {
	p, runID := queryParams(cl, nil)
	if p.err != nil {
		return nil, p.err
	}
	return map[string]any{"tasks": nonNil(readState(cl, func(st *projections.State) []projections.Task {
		return st.Tasks(runID)
	}))}, nil
}

// query.delegations {} → {delegations}.
func handleQueryDelegations(cl *call) (any, error) {
	p, runID := queryParams(cl, nil)
	if p.err != nil {
		return nil, p.err
	}
	return map[string]any{"delegations": nonNil(readState(cl, func(st *projections.State) []projections.Delegation {
		return st.Delegations(runID)
	}))}, nil
}

// query.ledger {} → {accounts}.
func handleQueryLedger(cl *call) (any, error) {
	p, runID := queryParams(cl, nil)
	if p.err != nil {
		return nil, p.err
	}
	return map[string]any{"accounts": nonNil(readState(cl, func(st *projections.State) []projections.Account {
		return st.Ledger(runID)
	}))}, nil
}

// query.slots {} → the daemon-wide slot pool {held, capacity, subIds}. It is not per run, but the orchestrator of
// any existing run may read it (admission depends on it); the admin still names a run, for uniformity.
func handleQuerySlots(cl *call) (any, error) {
	p, _ := queryParams(cl, nil)
	if p.err != nil {
		return nil, p.err
	}
	return readState(cl, func(st *projections.State) projections.Slots { return st.Slots() }), nil
}

// query.mailbox {taskId?, limit? 1..1000 (default 100), cursor?, pending?} → {messages, nextCursor?, hasMore,
// total}: any mailbox of the run (taskId absent = the run inbox), acknowledged messages included unless pending.
func handleQueryMailbox(cl *call) (any, error) {
	var (
		box, cursor string
		limit       int
		pending     bool
	)
	p, runID := queryParams(cl, func(p *params) {
		box = p.str("taskId", false, 256)
		limit = int(p.int("limit", 1, 1000, 100))
		cursor = p.str("cursor", false, 64)
		if v, ok := p.get("pending"); ok {
			pending = string(v) == "true"
			if !pending && string(v) != "false" {
				p.fail("pending", "a boolean")
			}
		}
	})
	if p.err != nil {
		return nil, p.err
	}
	return mailboxPage(cl, runID, box, projections.MailboxFilter{Pending: pending, Limit: limit, Cursor: cursor})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
