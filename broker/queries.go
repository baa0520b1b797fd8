package broker

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Queries read the engine's published state (never undurable) and return copies. They are crewlog's methods for
// the runtime: the orchestrator of the run, or the admin naming params.runId; a worker is forbidden. query.runs
// spans every run, so only the admin may call it. Unknown params keys are refused.

// queryParams checks the caller and reads the run (a cold run is read back, params.run); extra reads happen
// before strict via read.
func queryParams(cl *call, read func(p *params)) (*params, string) {
	return queryParamsWith(cl, read, (*params).run)
}

// queryParamsWith is queryParams reading the run with run.
func queryParamsWith(cl *call, read func(p *params), run func(*params, *call) string) (*params, string) {
	p := readParams(cl)
	if cl.c.id.role == events.RoleWorker {
		p.err = forbidden("%s requires an orchestrator or admin credential", cl.method)
		return p, ""
	}
	if read != nil {
		read(p)
	}
	runID := run(p, cl)
	p.strict()
	return p, runID
}

// readState is fn's answer from the published state (cl.read): the read's error (the credential no longer holds)
// first, else fn's, which comes with fn's answer.
func readState[T any](cl *call, fn func(st *projections.State) (T, error)) (T, error) {
	var (
		out T
		err error
	)
	if rerr := cl.read(func(st *projections.State) { out, err = fn(st) }); rerr != nil {
		var zero T
		return zero, rerr
	}
	return out, err
}

// runResult is query.run's answer: the run, and what its quotas and the slot pool count for it.
type runResult struct {
	WireRun
	Usage runUsage `json:"usage"`
}

type runUsage struct {
	Events    int64 `json:"events"`
	MsgBytes  int64 `json:"msgBytes"`
	TextBytes int64 `json:"textBytes"`
	SlotsHeld int   `json:"slotsHeld"`
}

// query.run {} → the run, with usage {events, msgBytes, textBytes, slotsHeld}. It answers from the run's summary
// (a cold run holds no slot), so a cold run is not read back for it.
func handleQueryRun(cl *call) (any, error) {
	p, runID := queryParamsWith(cl, nil, (*params).runSummary)
	if p.err != nil {
		return nil, p.err
	}
	res, err := readState(cl, func(st *projections.State) (runResult, error) {
		// NB: the summary is read again here, and a read that fails now is no zero run.
		r, _, err := st.LookupRun(runID)
		if err != nil {
			return runResult{}, err
		}
		return runResult{WireRun: WireRun{Run: r}, Usage: runUsage{Events: r.Usage.Events, MsgBytes: r.Usage.MsgBytes,
			TextBytes: r.Usage.TextBytes, SlotsHeld: st.SlotsHeldBy(runID)}}, nil
	})
	if err != nil {
		return nil, err
	}
	// NB: the run is encoded once: bytes that fit are the answer as they are (compactResult), not encoded again.
	room := wire.ResultRoom(cl.id, cl.c.s.opts.MaxFrame)
	if b, err := json.Marshal(res); err == nil && len(b)+1 <= room {
		return compactResult(b), nil
	}
	omitToFit(&res, room, func(r *runResult) { r.OmitTexts() }, func(r *runResult) { r.OmitNames() })
	return res, nil
}

// MaxRunsScan bounds the runs one page of query.runs, and of the dashboard's runs list, looks at
// (projections.RunFilter.MaxScan): a status that matches few of many runs answers fewer than limit runs, or none,
// with the cursor of the next run to look at, rather than reading the index of every run ever created in one read.
const MaxRunsScan = 5000

type runsResult struct {
	Runs       []WireRun `json:"runs"`
	NextCursor string    `json:"nextCursor,omitempty"`
}

// query.runs {status?: string|[string], limit? 1..1000 (default 100), cursor?, newest?} → {runs, nextCursor?}, cut
// to what fits in a frame as the other pages are (fitPage), and ending once it looked at MaxRunsScan runs.
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
	if p.err == nil && slices.ContainsFunc(statuses, func(st projections.RunStatus) bool {
		return !slices.Contains(runStatuses, string(st))
	}) {
		p.fail("status", "one or an array of "+strings.Join(runStatuses, ", "))
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
	pg, err := fitPageOmitting(cl, limit, func(limit int) (page[projections.Run], error) {
		rp, err := readState(cl, func(st *projections.State) (projections.RunPage, error) {
			return st.Runs(projections.RunFilter{Statuses: statuses, Limit: limit, Newest: newest, Cursor: cursor,
				MaxScan: MaxRunsScan})
		})
		return page[projections.Run]{items: rp.Runs, next: rp.NextCursor}, err
	}, func(r projections.Run) WireRun { return WireRun{Run: r} },
		omitting(cl, (*WireRun).OmitTexts, (*WireRun).OmitNames))
	if err != nil {
		return nil, err
	}
	return runsResult{Runs: pg.items, NextCursor: pg.next}, nil
}

// query.tasks {limit? 1..1000 (default 100), cursor?} → {tasks, nextCursor?, hasMore, total} (shadow tasks
// included; allocations filled from the ledger); with taskId, a page of that task's dependsOn {taskId, dependsOn,
// nextCursor?, hasMore, total}, which a task too large for a frame is sent without (task_fit.go).
func handleQueryTasks(cl *call) (any, error) {
	return queryRunPage(cl, "tasks", (*projections.State).TasksPage,
		func(t projections.Task) WireTask { return WireTask{Task: t} },
		omitting(cl, (*WireTask).OmitTexts, (*WireTask).OmitDependsOn, (*WireTask).OmitNames,
			(*WireTask).OmitQuestion),
		taskDependsOn)
}

// query.delegations {limit?, cursor?} → {delegations, nextCursor?, hasMore, total}.
func handleQueryDelegations(cl *call) (any, error) {
	return queryRunPage(cl, "delegations", (*projections.State).DelegationsPage,
		func(d projections.Delegation) WireDelegation { return WireDelegation{Delegation: d} },
		omitting(cl, (*WireDelegation).OmitTexts, (*WireDelegation).OmitNames), nil)
}

// taskList reads a page of one list of task taskID of run runID, which a paged query answers when it names the task
// (query.ledger's account history, query.tasks' dependsOn): a list its items are sent without when too large.
type taskList func(cl *call, runID, taskID string, limit int, cursor string) (any, error)

// queryRunPage answers a paged query over one run's records, in creation order, shortening the page to what fits
// in a frame (the cursor then points at the first record left out); with params.taskId, byTask's page of that task's
// list instead (a nil byTask takes no taskId).
func queryRunPage[T, W any](cl *call, key string,
	read func(st *projections.State, runID string, f projections.PageFilter) (projections.Page[T], error),
	render func(T) W, om omission[W], byTask taskList) (any, error) {
	var (
		limit          int
		cursor, taskID string
	)
	p, runID := queryParams(cl, func(p *params) {
		limit, cursor = pageParams(p)
		if byTask != nil {
			taskID = p.str("taskId", false, 256)
		}
	})
	if p.err != nil {
		return nil, p.err
	}
	if taskID != "" {
		return byTask(cl, runID, taskID, limit, cursor)
	}
	pg, err := runPage(cl, runID, limit, cursor, read, render, om)
	if err != nil {
		return nil, err
	}
	return pagedResult(key, pg), nil
}

// runPage reads a page of one run's records with read and renders it for the wire, cut to what fits in a frame.
func runPage[T, W any](cl *call, runID string, limit int, cursor string,
	read func(st *projections.State, runID string, f projections.PageFilter) (projections.Page[T], error),
	render func(T) W, om omission[W]) (page[W], error) {
	return fitPageOmitting(cl, limit, func(limit int) (page[T], error) {
		pp, err := readState(cl, func(st *projections.State) (projections.Page[T], error) {
			return read(st, runID, projections.PageFilter{Limit: limit, Cursor: cursor})
		})
		return page[T]{items: pp.Items, next: pp.NextCursor, total: pp.Total}, err
	}, render, om)
}

// query.slots {} → the daemon-wide slot pool {held, capacity, subIds, subIdsOmitted?} (slots_fit.go). It is not
// per run: the admin needs no runId (one it names must exist) and sees every holder. The orchestrator and the
// workers of any existing run may read it too (admission depends on it), but see only their own run's holders in
// subIds (held and capacity stay daemon-wide): other runs' delegation ids are not their business.
func handleQuerySlots(cl *call) (any, error) {
	p := readParams(cl)
	runID := ""
	if _, named := p.get("runId"); named || cl.c.id.role != events.RoleAdmin {
		runID = p.runSummary(cl) // the pool holds hot runs only: a cold run is not read back
	}
	p.strict()
	if p.err != nil {
		return nil, p.err
	}
	slots, err := readState(cl, func(st *projections.State) (projections.Slots, error) {
		if cl.c.id.role != events.RoleAdmin {
			return st.SlotsOf(runID), nil
		}
		return st.Slots(), nil
	})
	if err != nil {
		return nil, err
	}
	return fitSlots(cl, slots), nil
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
		limit, cursor = pageParams(p)
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
	return mailboxPage(cl, runID, box, projections.MailboxFilter{Pending: pending, Limit: limit, Cursor: cursor}, false)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
