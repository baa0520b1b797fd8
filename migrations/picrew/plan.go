package picrew

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// pi-crew's default delegate timeout (D§4.2): an imported admission that
// carries none gets it, so the engine's expiry can still end a delegation
// whose process died with pi-crew's broker.
const defaultTimeoutSec = 900

// planned is one write of the import, before the command-id check: the
// events encoded for the log (the one-shot import appends them), and the
// same events as typed payloads (a follower sends those to the daemon).
type planned struct {
	id     string // command id
	events []eventlog.Event
	items  []Item
	// size is the write's encodedSize, measured when the follower first
	// batches it (0: not yet).
	size int
}

// Item is one event of a planned write: its type, its time in pi-crew
// (unix ms) and its payload (a pointer to the events payload struct).
type Item struct {
	Type    string
	TimeMs  int64
	Payload any
}

// planner turns one run's files into writes, tracking just enough state
// (statuses, starts, allocations) to reconcile the history with the files.
type planner struct {
	s      *source
	r      *run
	writes []planned
	cur    *planned

	runStatus string
	tasks     map[string]*task // by id, from tasks.json
	status    map[string]string
	started   map[string]bool
	dels      map[string]string // subId → "queued", "running" or a terminal delegation status
	spent     map[string]int64  // parent task → tokens reserved or charged so far
	accounts  map[string]bool
	msgIDs    map[string]bool
	parents   map[string]string  // subId → parent task, from delegate.admitted
	created   map[string]bool    // workflow tasks whose task.created was planned
	msgs      map[string]message // planned messages, without their bodies
	delivered map[string]bool    // messages whose mailbox.delivered was planned
	acked     map[string]bool
	steered   map[string]bool // the what of every steer planned
	// questions an ask.requested was planned for → still open (not answered, not timed out)
	asks   map[string]bool
	parked map[string]park // workflow task → the question its last task.waiting planned parks it on
	// steerMessages are the messages steering lines were given (steer), without a mailbox line: id → its task.
	steerMessages map[string]string
	// foreignCount is how many events were kept as foreign.imported.
	foreignCount int
	// slots is the slot pool an admission is checked against: the one-shot import's (slotPool); nil for a
	// follower, whose daemon checks it.
	slots *slotPool
	// clockMs is the time (unix ms) the one-shot import records an event
	// at that has no time of its own nor its run a createdAt; 0 for a
	// follower, whose daemon records such an event at its own clock.
	clockMs int64
	// now is the clock of the process planning: where the daemon chooses
	// an event's time, it stands in for the daemon's in a deadline's range
	// check (deadlineFrom). Injected, so that a plan is a function of its
	// inputs.
	now func() time.Time
}

func newPlanner(s *source, r *run, now func() time.Time) *planner {
	p := &planner{s: s, r: r, now: now, tasks: map[string]*task{}, status: map[string]string{},
		started: map[string]bool{}, dels: map[string]string{}, spent: map[string]int64{}, accounts: map[string]bool{},
		msgIDs: map[string]bool{}, parents: map[string]string{}, created: map[string]bool{},
		msgs: map[string]message{}, delivered: map[string]bool{}, acked: map[string]bool{},
		steered: map[string]bool{}, asks: map[string]bool{}, parked: map[string]park{},
		steerMessages: map[string]string{}}
	p.setTasks(r.tasks)
	return p
}

// setTasks makes tasks (tasks.json as read now) the planner's task records.
func (p *planner) setTasks(tasks []task) {
	p.r.tasks = tasks
	p.tasks = make(map[string]*task, len(tasks))
	for i := range tasks {
		p.tasks[tasks[i].ID] = &tasks[i]
	}
}

// drain returns the writes planned since the last drain.
func (p *planner) drain() []planned {
	w := p.writes
	p.writes, p.cur = nil, nil
	return w
}

// begin starts the write with command id import:<runId>:<what>. A record
// whose id makes the command id longer than the log takes (a damaged
// file's, or an id pi-crew would never mint) cannot be imported under a
// name of its own: it is reported, its write is planned aside and dropped,
// and ok is false, so that a caller whose later writes depend on it can
// leave them out.
func (p *planner) begin(what string) (ok bool) {
	id := p.commandID(what)
	if len(id) > eventlog.MaxIDLen {
		p.s.skip(p.r.id, "state/runs/"+p.r.id, 0, 0,
			"%q: an id too long to name its import (a command id of %d bytes, at most %d): not imported", clip(what),
			len(id), eventlog.MaxIDLen)
		p.cur = &planned{id: id}
		return false
	}
	p.writes = append(p.writes, planned{id: id})
	p.cur = &p.writes[len(p.writes)-1]
	return true
}

// commandID is the command id of the write what: import:<runId>:<what>.
func (p *planner) commandID(what string) string { return "import:" + p.r.id + ":" + what }

// clip is s shortened for a report.
func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	return fmt.Sprintf("%.64s…", s)
}

// add appends an event to the current write; atMs is a pi-crew time.
func (p *planner) add(atMs int64, payload any) {
	typ, ok := events.TypeOf(payload)
	if !ok {
		panic(fmt.Sprintf("picrew: %T is not a payload", payload)) // a programming error, not input
	}
	p.cutTexts(strings.TrimPrefix(p.cur.id, "import:"+p.r.id+":"), typ, payload)
	b, err := events.EncodePayload(payload)
	if err != nil {
		panic(err) // payload structs always encode
	}
	atMs = p.notAhead(cmp.Or(atMs, p.r.manifest.CreatedAt.ms))
	p.cur.items = append(p.cur.items, Item{Type: typ, TimeMs: atMs, Payload: payload})
	p.cur.events = append(p.cur.events, eventlog.Event{
		Stream: p.r.id, Type: typ, SchemaVersion: events.SchemaVersion(typ), Time: atMs * 1e6,
		CorrelationID: events.ImportCorrelation + "picrew", ActorRole: events.RoleAdmin, Payload: b,
	})
}

// recordedAt is the time (unix ms) an event of pi-crew time atMs is
// recorded at (see flexTime): its own, else its run's createdAt, else the
// one-shot import's clock, never after this process's clock (notAhead); 0
// when a follower's daemon is the one to choose.
func (p *planner) recordedAt(atMs int64) int64 {
	return p.notAhead(cmp.Or(atMs, p.r.manifest.CreatedAt.ms, p.clockMs))
}

// notAhead is ms, or this process's clock when that is earlier. NB: the daemon records an imported event so too
// (commands.Import): what counts from an event's time (a run's wait for a slot, a deadline) would move with a time
// the files write ahead, up to 2255.
func (p *planner) notAhead(ms int64) int64 { return min(ms, p.now().UnixMilli()) }

// deadlineFrom is recordedAt for the range check of a deadline: where the
// daemon chooses, this process's clock stands in for the daemon's.
func (p *planner) deadlineFrom(atMs int64) int64 {
	return cmp.Or(p.recordedAt(atMs), p.now().UnixMilli())
}

// plan returns the run's writes in order: the run, its workflow tasks, the
// history, the mailbox, the steering entries, then the reconciliation.
func (p *planner) plan() []planned {
	p.runCreated()
	p.newTasks()
	for i := range p.r.events {
		p.event(&p.r.events[i])
	}
	p.mailbox()
	p.steering()
	p.reconcile()
	return p.writes
}

// runCreated plans the run's run.created, from the manifest.
func (p *planner) runCreated() {
	m := p.r.manifest
	p.begin("run")
	p.add(m.CreatedAt.ms, &events.RunCreated{Team: m.Team, Workflow: m.Workflow, Goal: m.Goal, Cwd: m.Cwd,
		BudgetTotal: importedBudget(m.BudgetTotal), BudgetUnlimited: m.BudgetUnlimited,
		BudgetWarning: m.BudgetWarning, BudgetAbort: m.BudgetAbort})
	p.runStatus = "queued"
}

// newTasks plans task.created for every workflow task of tasks.json not
// planned yet.
func (p *planner) newTasks() {
	m := p.r.manifest
	for _, t := range p.r.tasks {
		if t.shadow() || p.created[t.ID] {
			continue // a shadow is created by its delegate.admitted, or by the reconcile
		}
		p.created[t.ID] = true
		p.begin("task:" + t.ID)
		deps := t.DependsOn
		if deps == nil {
			deps = []string{}
		}
		p.add(m.CreatedAt.ms, &events.TaskCreated{TaskID: t.ID, Role: t.Role, Agent: t.Agent,
			Title: t.Title, Cwd: t.Cwd, DependsOn: deps, StepID: *t.StepID, Depth: t.Depth, Model: t.Model,
			Kind: events.TaskKindWorkflow})
		p.status[t.ID] = "queued"
	}
}

// data decodes an event's data into v; a malformed one is reported.
func (p *planner) data(ev *teamEvent, v any) bool {
	return p.dataDecoded(ev, v, decodeData(ev.Data, v))
}

// decodeData decodes an event's data into v; none (absent, or null) leaves v as it is.
func decodeData(data json.RawMessage, v any) error {
	if len(data) == 0 || string(data) == "null" {
		return nil
	}
	return json.Unmarshal(data, v)
}

// dataDecoded reports an event's data that did not decode into v (err), and the times v holds that crewlog does not
// record; false when it did not decode.
func (p *planner) dataDecoded(ev *teamEvent, v any, err error) bool {
	if err != nil {
		p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq, "%s data does not decode: skipped", ev.Type)
		return false
	}
	p.s.reportTimes(p.r.id, ev.line, 0, ev.Metadata.Seq, "", "data.", v)
	return true
}

// event maps one pi-crew event (D§3.3–3.6).
func (p *planner) event(ev *teamEvent) {
	at := ev.Time.ms
	what := fmt.Sprintf("seq:%d", ev.Metadata.Seq)
	switch ev.Type {
	case "run.created", "task.created":
		return // from the manifest and tasks.json, which carry every field
	case "run.queued", "run.planning", "run.running", "run.blocked", "run.completed", "run.failed", "run.cancelled":
		p.begin(what)
		p.addRunStatus(at, ev.Type, ev.Message, "")
	case "run.budget_warning", "run.budget_abort":
		var d events.RunBudget
		if !p.data(ev, &d) {
			return
		}
		p.begin(what)
		if ev.Type == "run.budget_warning" {
			p.add(at, (*events.RunBudgetWarning)(&d))
		} else {
			p.add(at, (*events.RunBudgetAbort)(&d))
		}
	case "task.started", "task.completed", "task.failed", "task.needs_attention", "task.cancelled", "task.skipped",
		"task.retried", "task.waiting", "task.resumed":
		p.taskEvent(ev, what, at)
	case "delegate.requested", "delegate.admitted", "delegate.rejected", "delegate.completed", "delegate.failed",
		"delegate.timed_out", "delegate.cancelled":
		p.delegateEvent(ev, what, at)
	case "ask.requested", "ask.answered", "ask.timedout":
		p.askEvent(ev, what, at)
	default:
		p.foreign(ev, what, at)
	}
}

// foreign keeps an event without a crewlog counterpart as it was (events.ForeignImported): nothing pi-crew
// wrote is dropped, and it changes no projection.
func (p *planner) foreign(ev *teamEvent, what string, at int64) {
	var data bytes.Buffer
	if len(ev.Data) > 0 && string(ev.Data) != "null" && json.Compact(&data, ev.Data) != nil {
		data.Reset() // the source line decoded, so its data is JSON; never reached
	}
	iso := ""
	if ev.Time.ms != 0 {
		iso = time.UnixMilli(ev.Time.ms).UTC().Format("2006-01-02T15:04:05.000Z")
	}
	p.begin(what)
	// NB: with each byte that is not UTF-8 as U+FFFD, as encoding/json reads a JSON string. A foreign event's data is
	// its line's JSON text, which JSON decoders take with such bytes inside a string: kept, the one-shot import
	// recorded them and events.since served them in its frames, while a follower's write, whose data is a JSON
	// string, carried U+FFFD for each, and the two recorded different events under one command id.
	p.add(at, &events.ForeignImported{Source: events.ForeignSourcePicrew, Type: ev.Type, Seq: int64(ev.Metadata.Seq),
		Time: iso, TaskID: ev.TaskID, Message: ev.Message, Data: events.AsJSONReadsBack(data.String())})
	p.foreignCount++
}

func (p *planner) addRunStatus(at int64, typ, summary, reason string) {
	c := events.RunStatusChanged{Summary: summary, Reason: reason}
	var pl any
	switch typ {
	case "run.queued":
		pl = (*events.RunQueued)(&c)
	case "run.planning":
		pl = (*events.RunPlanning)(&c)
	case "run.running":
		pl = (*events.RunRunning)(&c)
	case "run.blocked":
		pl = (*events.RunBlocked)(&c)
	case "run.completed":
		pl = (*events.RunCompleted)(&c)
	case "run.failed":
		pl = (*events.RunFailed)(&c)
	default:
		pl = (*events.RunCancelled)(&c)
	}
	p.add(at, pl)
	p.runStatus = typ[len("run."):]
}

func (p *planner) taskEvent(ev *teamEvent, what string, at int64) {
	if p.tasks[ev.TaskID] == nil || p.tasks[ev.TaskID].shadow() {
		p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq,
			"%s names task %q, not a workflow task of tasks.json: skipped", ev.Type, ev.TaskID)
		return
	}
	id := ev.TaskID
	var d struct {
		Role, Agent, Runtime, Cwd, WorktreePath, WorktreeBranch string
		WorktreeReused                                          bool
		FailureCause, Reason, Phase, QuestionID                 string
		Deadline                                                flexTime
		Options                                                 []string
	}
	if !p.data(ev, &d) {
		return
	}
	if ev.Type == "task.resumed" && !p.idsOK(ev, namedID{"questionId", d.QuestionID}) {
		return
	}
	if ev.Type == "task.waiting" && !events.ImportedQuestionIDOK(d.QuestionID) {
		// NB: a follower reconciles a live run only once it has finished: recorded, the task waited until then on a
		// question nobody could answer and nothing would time out.
		p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq,
			"task.waiting for task %s: question %q is not one wait.resolve takes (1..%d chars"+questionIDBytes+
				"): skipped, the task left %s", id, clip(d.QuestionID), events.MaxQuestionIDChars,
			firstOf(p.status[id], "queued"))
		return
	}
	p.begin(what)
	switch ev.Type {
	case "task.started":
		p.add(at, &events.TaskStarted{TaskID: id, Role: d.Role, Agent: d.Agent, Runtime: d.Runtime, Cwd: d.Cwd,
			WorktreePath: d.WorktreePath, WorktreeBranch: d.WorktreeBranch, WorktreeReused: d.WorktreeReused})
		p.status[id], p.started[id] = "running", true
	case "task.completed":
		p.add(at, &events.TaskCompleted{TaskID: id, FailureCause: d.FailureCause})
		p.status[id] = "completed"
	case "task.failed":
		p.add(at, &events.TaskFailed{TaskID: id, Error: ev.Message, FailureCause: d.FailureCause})
		p.status[id] = "failed"
	case "task.needs_attention":
		p.add(at, &events.TaskNeedsAttention{TaskID: id, Error: ev.Message, FailureCause: d.FailureCause})
		p.status[id] = "needs_attention"
	case "task.cancelled":
		p.add(at, &events.TaskCancelled{TaskID: id, Reason: d.Reason, Phase: d.Phase})
		p.status[id] = "cancelled"
	case "task.skipped":
		p.add(at, &events.TaskSkipped{TaskID: id, Reason: firstOf(d.Reason, ev.Message)})
		p.status[id] = "skipped"
	case "task.retried":
		p.add(at, &events.TaskRetried{TaskID: id, Reason: ev.Message})
		p.status[id], p.started[id] = "queued", false
	case "task.waiting":
		q := p.question(ev.line, ev.Metadata.Seq, ev.Type, at, d.QuestionID, d.Deadline.ms, d.Options)
		p.add(at, &events.TaskWaiting{TaskID: id, QuestionID: q.question, AskedAt: q.at, Deadline: q.deadline,
			Options: q.options})
		p.status[id] = "waiting"
		p.parked[id] = q
	case "task.resumed":
		p.add(at, &events.TaskResumed{TaskID: id, QuestionID: d.QuestionID})
		p.status[id] = "running"
	}
}

func firstOf(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// delegateData is the data of a delegate.* event.
type delegateData struct {
	SubID          string  `json:"subId"`
	Role           string  `json:"role"`
	ChildDepth     int     `json:"childDepth"`
	Unmetered      bool    `json:"unmetered"`
	ReservedTokens int64   `json:"reservedTokens"`
	Reason         string  `json:"reason"`
	Message        string  `json:"message"`
	OK             bool    `json:"ok"`
	TimeoutSec     float64 `json:"timeoutSec"`
}

// delegation is ev's data as a delegate.* event's, decoded once: a follower reads an admission's subId before it
// plans the line (lacksTask), and delegateEvent all of it. It is a copy, which its caller may change.
func (ev *teamEvent) delegation() (delegateData, error) {
	if ev.delegate == nil {
		ev.delegate = &delegateData{}
		ev.delegateErr = decodeData(ev.Data, ev.delegate)
	}
	return *ev.delegate, ev.delegateErr
}

func (p *planner) delegateEvent(ev *teamEvent, what string, at int64) {
	d, err := ev.delegation()
	if !p.dataDecoded(ev, &d, err) {
		return
	}
	parent := ev.TaskID
	ids := []namedID{{"taskId", parent}}
	if ev.Type != "delegate.admitted" { // its subId is held to a task id's pattern below
		ids = append(ids, namedID{"subId", d.SubID})
	}
	if !p.idsOK(ev, ids...) {
		return
	}
	if ev.Type != "delegate.requested" && ev.Type != "delegate.rejected" && !p.namesTask(ev) {
		return // NB: pi-crew's broker writes these two before it looks the task up (a rejection: no-task)
	}
	switch ev.Type {
	case "delegate.requested":
		p.begin(what)
		p.add(at, &events.DelegateRequested{TaskID: parent, SubID: d.SubID, Role: d.Role})
	case "delegate.rejected":
		p.begin(what)
		p.add(at, &events.DelegateRejected{TaskID: parent, SubID: d.SubID, Reason: d.Reason, Message: d.Message})
	case "delegate.admitted":
		// NB: the subId names the delegation's shadow task (crewlog mints it, so no task of the run has it). One
		// naming a workflow task took that task for its shadow, and the delegation's settlement, or its expiry,
		// ended it; one outside the ids tasks.json is held to became a task id no command names.
		if !runIDPattern.MatchString(d.SubID) {
			p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq,
				"delegate.admitted for %q: not an id crewlog takes (1..255 chars of [A-Za-z0-9_-]): skipped",
				clip(d.SubID))
			return
		}
		if events.TaskIDReserved(d.SubID) {
			p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq,
				"delegate.admitted for %q: an id that names the run inbox, a group of tasks or the "+
					"orchestrator: skipped", d.SubID)
			return
		}
		if t := p.tasks[d.SubID]; t != nil && !t.shadow() || p.created[d.SubID] {
			p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq, workflowSubIDReason, d.SubID)
			return
		}
		if p.dels[d.SubID] != "" {
			p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq, secondAdmissionReason, d.SubID)
			return
		}
		if !events.SpendTokensOK(d.ReservedTokens) {
			// Spend only grows (SPEC §4.2): no admission reserves less than nothing, and the ledger would not add
			// it; crewd's import.append refuses a reservation above events.MaxUsageTokens.
			p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq,
				"delegate.admitted for %s reserves %d tokens, not 0..%d: skipped", d.SubID, d.ReservedTokens,
				int64(events.MaxUsageTokens))
			return
		}
		if !events.DepthOK(d.ChildDepth) {
			p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq,
				"delegate.admitted for %s: childDepth %d is not 0..%d: taken as absent", d.SubID, d.ChildDepth,
				events.MaxDepth)
			d.ChildDepth = 0
		}
		if d.TimeoutSec > events.MaxTimeoutSec {
			p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq, "delegate.admitted for %s: timeoutSec %g is longer than "+
				"a delegation runs (at most %d s): taken as absent", d.SubID, d.TimeoutSec, events.MaxTimeoutSec)
			d.TimeoutSec = 0
		}
		if float64(p.deadlineFrom(at))+d.TimeoutSec*1000 > maxTimeMs {
			// Its deadline is a time like the others (flexTime): one past
			// what crewlog records is damage, and the timeout taken as
			// absent.
			p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq, "delegate.admitted for %s: timeoutSec %g puts its "+
				"deadline past what crewlog records (%s): taken as absent", d.SubID, d.TimeoutSec, timeRange)
			d.TimeoutSec = 0
		}
		switch run, why := p.slotTaken(d.SubID, what); why {
		case subIDWorkflowTask:
			p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq, workflowSubIDReason, d.SubID)
			return
		case subIDAdmitted:
			p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq, secondAdmissionReason, d.SubID)
			return
		case subIDHeld:
			p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq,
				"delegate.admitted for %s: its subId holds a slot of run %s (the slot pool is keyed by "+
					"subId): skipped", d.SubID, run)
			return
		}
		p.begin(what)
		p.admit(at, parent, d.SubID, d.Role, d.ChildDepth, d.Unmetered, d.ReservedTokens, d.TimeoutSec)
	default: // terminal
		if p.dels[d.SubID] == "" {
			p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq,
				"%s for %s, which was never admitted in the events: the files decide", ev.Type, d.SubID)
			return
		}
		if terminal(p.dels[d.SubID]) {
			p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq, "%s for %s, already settled: skipped", ev.Type, d.SubID)
			return
		}
		outcome := map[string]string{"delegate.timed_out": "timed_out", "delegate.cancelled": "cancelled",
			"delegate.failed": "failed"}[ev.Type]
		if outcome == "" { // pi-crew's delegate.completed carries {ok}
			outcome = "completed"
			if !d.OK {
				outcome = "failed"
			}
		}
		p.begin(what)
		p.settle(at, parent, d.SubID, outcome)
	}
}

// workflowSubIDReason reports a delegate.admitted whose subId (its argument) names a workflow task of its run.
const workflowSubIDReason = "delegate.admitted for %q: a workflow task of the run has that id: skipped"

// secondAdmissionReason reports a delegate.admitted of a subId (its argument) its run admitted already.
const secondAdmissionReason = "second delegate.admitted for %s: skipped"

// admit writes delegate.admitted (and budget.reserved when metered) with the
// shadow record's cwd and title.
func (p *planner) admit(at int64, parent, subID, role string, depth int, unmetered bool, reserved int64,
	timeoutSec float64) {
	sh := p.tasks[subID]
	cwd, title := "", "delegate: "+subID
	if sh != nil {
		cwd, title = sh.Cwd, firstOf(sh.Title, title)
		if depth == 0 {
			depth = sh.Depth
		}
		if role == "" {
			role = sh.Role
		}
	}
	if timeoutSec <= 0 {
		timeoutSec = defaultTimeoutSec
	}
	// The deadline counts from the time the admission is recorded at, as
	// the engine's own does (recordedAt: never after this process's clock,
	// or a deadline two centuries ahead held its slot of the daemon-wide
	// pool that long; commands.Import bounds it so too). Unknown here (a
	// follower's event with no time in a run with no createdAt), it is left
	// 0 and the daemon counts it from its clock (commands.Import): from 0 it
	// was 1970, and the delegation expired as soon as it was imported.
	deadline := int64(0)
	if from := p.recordedAt(at); from > 0 {
		deadline = from + int64(timeoutSec*1000)
	}
	p.add(at, &events.DelegateAdmitted{TaskID: parent, SubID: subID, ChildDepth: depth, Role: firstOf(role,
		"explorer"),
		Unmetered: unmetered, ReservedTokens: reserved, TimeoutSec: timeoutSec, Deadline: deadline,
		Cwd: cwd, Title: title, ParentRole: p.roleOf(parent)})
	p.dels[subID] = "queued"
	p.parents[subID] = parent
	if p.slots != nil {
		p.slots.admit(p.r.id, subID)
	}
	if !unmetered {
		p.add(at, &events.BudgetReserved{TaskID: parent, SubID: subID, Tokens: reserved,
			GrantedTokens: p.grant(parent)})
		p.spent[parent] += reserved
		p.accounts[parent] = true
	}
}

func (p *planner) roleOf(taskID string) string {
	if t := p.tasks[taskID]; t != nil {
		return t.Role
	}
	return ""
}

// grant is the parent's write-once tokensGranted: tasks.json's allocation,
// else the run's budgetTotal (SPEC §4.2 seeding).
func (p *planner) grant(parent string) int64 {
	if t := p.tasks[parent]; t != nil && t.Allocation != nil {
		return t.Allocation.TokensGranted
	}
	return int64(p.r.manifest.BudgetTotal)
}

func terminal(st string) bool {
	return st == "completed" || st == "failed" || st == "timed_out" || st == "cancelled"
}

func (p *planner) settle(at int64, parent, subID, outcome string) {
	s := events.DelegateSettled{TaskID: parent, SubID: subID, OK: outcome == "completed"}
	switch outcome {
	case "completed":
		p.add(at, (*events.DelegateCompleted)(&s))
	case "failed":
		p.add(at, (*events.DelegateFailed)(&s))
	case "timed_out":
		p.add(at, (*events.DelegateTimedOut)(&s))
	default:
		p.add(at, (*events.DelegateCancelled)(&s))
	}
	p.dels[subID] = outcome
	if p.slots != nil {
		p.slots.settle(p.r.id, subID)
	}
}

// slotTaken says why an admission of subID planned as the write what must be left out, and which run holds its slot
// (slotPool.taken); subIDFree when the planner does not know the pool.
func (p *planner) slotTaken(subID, what string) (run string, why subIDTaken) {
	if p.slots == nil {
		return "", subIDFree
	}
	return p.slots.taken(p.r.id, subID, p.commandID(what))
}

func (p *planner) askEvent(ev *teamEvent, what string, at int64) {
	var d struct {
		QuestionID string   `json:"questionId"`
		Deadline   flexTime `json:"deadline"`
		TimeoutSec int64    `json:"timeoutSec"`
		Clamped    bool     `json:"clamped"`
		Options    []string `json:"options"`
	}
	if !p.data(ev, &d) {
		return
	}
	ids := []namedID{{"taskId", ev.TaskID}}
	if ev.Type != "ask.requested" { // its question id is held to what wait.resolve takes below
		ids = append(ids, namedID{"questionId", d.QuestionID})
	}
	if !p.idsOK(ev, ids...) || !p.namesTask(ev) {
		return
	}
	if ev.Type == "ask.requested" && !events.ImportedQuestionIDOK(d.QuestionID) {
		// NB: crewd's import.append refuses it, as wait.request never asks one: nobody can answer it.
		p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq,
			"ask.requested for task %s: question %q is not one wait.resolve takes (1..%d chars"+questionIDBytes+
				"): skipped", ev.TaskID, clip(d.QuestionID), events.MaxQuestionIDChars)
		return
	}
	p.begin(what)
	switch ev.Type {
	case "ask.requested":
		q := p.question(ev.line, ev.Metadata.Seq, ev.Type, at, d.QuestionID, d.Deadline.ms, d.Options)
		p.add(at, &events.AskRequested{TaskID: ev.TaskID, QuestionID: q.question, Question: ev.Message, AskedAt: q.at,
			Deadline: q.deadline, TimeoutSec: d.TimeoutSec, Clamped: d.Clamped, Options: q.options})
		if _, asked := p.asks[d.QuestionID]; !asked {
			p.asks[d.QuestionID] = true // a second ask.requested of the same id changes nothing (projections)
		}
	case "ask.answered":
		p.add(at, &events.AskAnswered{TaskID: ev.TaskID, QuestionID: d.QuestionID})
		p.closeAsk(d.QuestionID)
	default:
		p.add(at, &events.AskTimedOut{TaskID: ev.TaskID, QuestionID: d.QuestionID})
		p.closeAsk(d.QuestionID)
	}
}

// importedIDBound is how long an id may be (events.ImportedIDOK), as the reports say it.
var importedIDBound = fmt.Sprintf("%d chars, or %d bytes in JSON", events.MaxIDChars, events.MaxIDChars)

// questionIDBytes is what the reports of a question id add to wait.resolve's bound (events.ImportedQuestionIDOK).
var questionIDBytes = fmt.Sprintf(", of at most %d bytes in JSON", events.MaxIDChars)

// namedID is an id a record names something by, with its field's name.
type namedID struct{ name, id string }

// idsOK reports whether every id of line ev is one crewlog records (events.ImportedIDOK), and its taskId is not
// empty; the line of one that is not is reported and skipped. NB: not cut: a cut id names another task, delegation or
// question, and crewd's import.append refuses a longer one; uncut, it was recorded, and a delegation's parent, a
// budget account or a question kept it in every read and snapshot of the run.
func (p *planner) idsOK(ev *teamEvent, ids ...namedID) bool {
	for _, n := range ids {
		if n.name == "taskId" && n.id == "" {
			// NB: an empty id is the run inbox's mailbox key, and crewd's import.append refuses it where a task is
			// named.
			p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq, "%s names no task: skipped", ev.Type)
			return false
		}
		if !events.ImportedIDOK(n.id) {
			p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq,
				"%s: %s %s is longer than %s, as no id crewlog records: skipped", ev.Type, n.name, clip(n.id),
				importedIDBound)
			return false
		}
	}
	return true
}

// namesTask reports whether line ev's taskId is a task of tasks.json (a workflow task, or a delegation's shadow); the
// line of one that is not is reported and skipped, as a task event's is (taskEvent). NB: pi-crew's broker admits and
// settles a delegation, and parks or answers a question, only for a task it found in tasks.json (it adds a shadow
// there before its admission's line); a line naming another is a worker's, and recorded it took a budget account, a
// delegation's parent or a question for a task the run does not have.
func (p *planner) namesTask(ev *teamEvent) bool {
	if p.tasks[ev.TaskID] != nil {
		return true
	}
	p.s.skip(p.r.id, ev.line, 0, ev.Metadata.Seq, "%s names task %q, not a task of tasks.json: skipped", ev.Type,
		clip(ev.TaskID))
	return false
}

// closeAsk notes that question q, if it was asked, is no longer open.
func (p *planner) closeAsk(q string) {
	if _, asked := p.asks[q]; asked {
		p.asks[q] = false
	}
}

// question is a question of a record (a line of where, or its seq; typ names it in the report), asked at pi-crew
// time at, as the import records it: its deadline bounded (askDeadline), then its options (askOptions), each
// reported.
func (p *planner) question(where string, seq uint64, typ string, at int64, questionID string, deadline int64,
	options []string) park {
	return park{question: questionID, at: at, deadline: p.askDeadline(where, seq, typ, at, questionID, deadline),
		options: p.askOptions(where, seq, typ, questionID, options)}
}

// askDeadline is the deadline a question of a record (a line of where, or its seq; typ names it in the report),
// at pi-crew time at, is recorded with: deadline, or, when that is more than events.MaxAskTimeoutSec after the time
// it is recorded at (recordedAt; no broker of pi-crew's writes one), that bound, reported.
func (p *planner) askDeadline(where string, seq uint64, typ string, at int64, questionID string,
	deadline int64) int64 {
	latest := p.deadlineFrom(at) + events.MaxAskTimeoutSec*1000
	if deadline <= latest {
		return deadline
	}
	p.s.skip(p.r.id, where, 0, seq, "%s for question %s: deadline %d is more than %d s after it was asked "+
		"(pi-crew's broker clamps it so): taken as %d", typ, clip(questionID), deadline,
		events.MaxAskTimeoutSec, latest)
	return latest
}

// askOptions are the options a question of a record (as for askDeadline) is recorded with: options when they are
// what crewlog's wait.request takes (events.AskOptionsCountOK, events.AskOptionOK), none for an empty list (which the
// log records as none), and otherwise none, reported: every read of the question and of its task's park marker
// copies them, and pi-crew's broker refuses any other list (R5).
func (p *planner) askOptions(where string, seq uint64, typ, questionID string, options []string) []string {
	if len(options) == 0 {
		return nil
	}
	if many, badOption := events.AskOptionsProblem(options); many || badOption {
		p.s.skip(p.r.id, where, 0, seq, "%s for question %s: options are not 1..%d strings of 1..%d chars: "+
			"the question is imported without them", typ, clip(questionID), events.MaxAskOptions,
			events.MaxAskOptionChars)
		return nil
	}
	return options
}

// park is the question a task.waiting planned parks its task on, with what the question's ask.requested carries
// when the import has to plan it (reconcileParked).
type park struct {
	question     string
	at, deadline int64
	options      []string
}

// reconcileParked leaves task id, when it is waiting, parked on an open question, as crewlog's own wait.request parks
// a task (task.waiting with its ask.requested) and nothing else leaves it (wait.resolve answers the question, the
// engine clock times it out at its deadline, the task's end closes it). A question the history never asked (pi-crew's
// compaction drops the oldest events, a run's files may hold a task.waiting alone) is asked now, from the waiting
// record, without the question's text, which only its ask.requested carries: the engine clock then ends it at its
// deadline. A task waiting on a question answered or timed out already would wait for good: it is resumed, as the
// engine resumes a task whose question closes, and reported. NB: a task is parked only on a question wait.resolve
// can name (events.QuestionIDOK): a task.waiting line of another is skipped, a waiting record of another reconciled
// running.
func (p *planner) reconcileParked(id string) {
	if p.status[id] != "waiting" {
		return
	}
	w := p.parked[id]
	open, asked := p.asks[w.question]
	switch {
	case asked && open:
		return
	case !asked:
		if !p.begin("reconcile:ask:" + id + ":" + w.question) {
			return
		}
		timeout := int64(0)
		if w.deadline > w.at {
			timeout = min((w.deadline-w.at)/1000, events.MaxAskTimeoutSec)
		}
		p.add(w.at, &events.AskRequested{TaskID: id, QuestionID: w.question, AskedAt: w.at, Deadline: w.deadline,
			TimeoutSec: timeout, Options: w.options})
		p.asks[w.question] = true
		return
	}
	p.s.skip(p.r.id, "state/runs/"+p.r.id+"/tasks.json", 0, 0,
		"task %s: waiting on question %q, which is answered or timed out already: imported as resumed",
		id, w.question)
	if !p.begin("reconcile:resume:" + id + ":" + w.question) {
		return
	}
	p.add(p.r.manifest.UpdatedAt.ms, &events.TaskResumed{TaskID: id, QuestionID: w.question})
	p.status[id] = "running"
}

// mailbox writes each message, then its delivery state; delivery.json is
// the status source (the JSONL line keeps "queued" after an ack, D§2.6).
// The state is a write of its own (delivery:<id>:<status>), so a follower
// that saw the message before it was delivered records the delivery later
// under the same id an import of the finished files would use.
func (p *planner) mailbox() {
	for _, m := range p.r.messages {
		p.message(m)
		p.delivery(m.ID, firstOf(p.r.delivery[m.ID], m.Status))
	}
}

// message plans one mailbox message.
func (p *planner) message(m message) {
	if !p.begin("msg:" + m.ID) {
		return // and nor its deliveries
	}
	ma := &events.MailboxAppended{ID: m.ID, To: recipient(m), From: m.From, Kind: firstOf(m.Kind, events.KindMessage),
		Priority:     firstOf(m.Priority, events.PriorityNormal),
		DeliveryMode: firstOf(m.DeliveryMode, events.DeliveryNextTurn), Body: m.Body, QuestionID: m.QuestionID,
		ReplyTo: m.ReplyTo}
	if m.Data != nil {
		ma.Data = &events.MessageData{SubID: m.Data.SubID, OK: m.Data.OK, TimedOut: m.Data.TimedOut,
			Cancelled: m.Data.Cancelled}
	}
	p.add(m.CreatedAt.ms, ma)
	p.msgIDs[m.ID] = true
	// NB: without its body, which its write carries: a follower keeps a live run's planner, and it held every body
	// the run ever sent (up to 256 Ki chars each); what later records name a message by is its mailbox and its time.
	m.Body, m.Data = "", nil
	p.msgs[m.ID] = m
}

// recipient is whose mailbox a message is in: its file's (D§2.6: a message's taskId and direction select the file
// pi-crew writes it to, and a task's inbox is what its file holds). NB: not what its line names (lineMailbox): a
// line of one task's file naming another would otherwise put a message in that other task's mailbox.
func recipient(m message) string {
	if m.outbox {
		return events.RunInbox // a task's outbox is read by the orchestrator
	}
	return m.file // "" for the run-level inbox: events.RunInbox
}

// delivery plans the delivery state st ("delivered" or "acknowledged") of
// a planned message, each step once, naming the mailbox it is in (mailboxOf).
func (p *planner) delivery(id, st string) {
	m, ok := p.msgs[id]
	if !ok || (st != "delivered" && st != "acknowledged") {
		return
	}
	to, _ := p.mailboxOf(id)
	at := m.CreatedAt.ms
	if !p.delivered[id] {
		p.begin("delivery:" + id + ":delivered")
		p.add(at, &events.MailboxDelivered{MessageID: id, Recipient: to})
		p.delivered[id] = true
	}
	if st == "acknowledged" && !p.acked[id] {
		p.begin("delivery:" + id + ":acknowledged")
		p.add(at, &events.MailboxAcknowledged{MessageID: id, Recipient: to})
		p.acked[id] = true
	}
}

// steering writes each steering line as steer.pushed after its message:
// the broker's dual write (D§2.7) already put most in the mailbox; a
// legacy line without an id, or whose message is gone, gets its message
// here, with an id derived from its place in the file.
func (p *planner) steering() {
	for _, st := range p.r.steers {
		p.steer(st)
	}
}

// steer plans one steering line. A second line under the id of one
// planned (the same id twice in the file, or a line whose id is the one
// derived for a legacy line) is reported and left out: its write would
// carry the first one's command id; so is a line of an id no message of
// crewlog's has (events.ImportedIDOK), and one of a file named for a task
// tasks.json lacks.
func (p *planner) steer(st steer) {
	id := st.ID
	if id == "" {
		id = fmt.Sprintf("steer_import_%s_%d", st.taskID, st.line)
		if !events.ImportedIDOK(id) {
			// NB: reported as derived, not as the line's: it has none, and the id is long for its task's (the
			// steering file's name, 242 chars or more). No shorter id would import it: the write's command id names
			// the task too (begin), and is longer than eventlog.MaxIDLen whatever the id. A derived id that fits is
			// unchanged.
			p.s.skip(p.r.id, st.rel, st.line, 0,
				"steer of task %s without an id: the id derived for it, %s, is longer than %s, as no id crewlog "+
					"records: skipped", clip(st.taskID), clip(id), importedIDBound)
			return
		}
	}
	if !events.ImportedIDOK(id) {
		// NB: the id is its message's, which crewd's import.append refuses, as a mailbox line's (parseMessage).
		p.s.skip(p.r.id, st.rel, st.line, 0,
			"steer %s of task %s: its id is longer than %s, as no id crewlog records: skipped", clip(id), st.taskID,
			importedIDBound)
		return
	}
	if p.tasks[st.taskID] == nil {
		// NB: pi-crew's broker steers a task it found in tasks.json, as crewlog's steer.push refuses a task the run
		// does not have (no-task): recorded, the steer.pushed and its message named a task the run does not have.
		// Skipped as an event line naming no task of tasks.json is.
		p.s.skip(p.r.id, st.rel, st.line, 0, "steer %s names task %q, not a task of tasks.json: skipped", clip(id),
			clip(st.taskID))
		return
	}
	if to, ok := p.mailboxOf(id); ok && to != st.taskID {
		// NB: a message id is its run's one message (as for a mailbox line, messageAgain), and pi-crew writes a
		// steer's to its task's inbox: recorded, this task's steer.pushed named a message of another mailbox, a
		// steer the task never had.
		p.s.skip(p.r.id, st.rel, st.line, 0, "steer %s of task %s: its id is a message of %s: skipped (a message id "+
			"is its run's one message)", id, st.taskID, mailboxOwner(to))
		return
	}
	what := "steer:" + st.taskID + ":" + id
	if p.steered[what] {
		p.s.skip(p.r.id, st.rel, st.line, 0, "steer %s of task %s appears twice: the first is kept", id, st.taskID)
		return
	}
	p.steered[what] = true
	if !p.begin(what) {
		return
	}
	at := st.TS.ms
	if !p.msgIDs[id] {
		p.add(at, &events.MailboxAppended{ID: id, To: st.taskID, From: "orchestrator", Kind: events.KindSteer,
			Priority: events.PriorityUrgent, DeliveryMode: events.DeliveryInterrupt, Body: st.Message})
		p.msgIDs[id] = true
		p.steerMessages[id] = st.taskID
	}
	p.add(at, &events.SteerPushed{TaskID: st.taskID, MessageID: id})
}

// mailboxOf is whose mailbox the planned message id is in: the one a steering line was given (steer), or a mailbox
// line's (recipient); ok is false when no message of that id is planned. NB: the steer's first: a follower that gave
// a steering line a message of its own records the mailbox line under its id read after it too (planLine), whose
// mailbox.appended, the id's second, the engine leaves out; the message is the steer's, in its task's mailbox, where
// the line may name another (a worker's). The one-shot import plans the mailbox first, and gives no steer a message
// of an id a line has.
func (p *planner) mailboxOf(id string) (to string, ok bool) {
	if to, ok := p.steerMessages[id]; ok {
		return to, true
	}
	m, ok := p.msgs[id]
	return recipient(m), ok
}

// mailboxOwner names the mailbox to, for a report: the run's inbox, or a task's mailbox.
func mailboxOwner(to string) string {
	if to == events.RunInbox {
		return "the run's inbox"
	}
	return to + "'s mailbox"
}

// reconcile appends what the (possibly compacted) history lacks so that
// the run ends as its files say. Each write's id names the end state, so
// a later import of files that moved on reconciles again.
func (p *planner) reconcile() {
	m := p.r.manifest
	for _, t := range p.r.tasks {
		if t.shadow() {
			p.reconcileShadow(t)
		} else {
			p.reconcileTask(t)
		}
		p.reconcileParked(t.ID)
	}
	for _, t := range p.r.tasks {
		p.reconcileAllocation(t)
	}
	if m.Status != "" && m.Status != p.runStatus {
		if _, ok := events.RunStatusType(m.Status); !ok {
			p.s.skip(p.r.id, "state/runs/"+p.r.id+"/manifest.json", 0, 0,
				"run status %q is not a pi-crew status: left %s", m.Status, p.runStatus)
			return
		}
		p.begin("reconcile:run:" + m.Status)
		p.addRunStatus(m.UpdatedAt.ms, "run."+m.Status, "", "import: status from manifest.json")
	}
}

func (p *planner) reconcileTask(t task) {
	id, want := t.ID, t.Status
	if q := ""; want == "waiting" && p.status[id] != "waiting" {
		if t.Waiting != nil {
			q = t.Waiting.QuestionID
		}
		if !events.ImportedQuestionIDOK(q) {
			// NB: parked on a question nobody can name, the task would wait for good; crewd's import.append refuses
			// such a task.waiting, as wait.request never parks one.
			p.s.skip(p.r.id, "state/runs/"+p.r.id+"/tasks.json", 0, 0, "task %s: waiting on question %q, which "+
				"wait.resolve cannot name: imported as running", id, clip(q))
			want = "running"
		}
	}
	if want == "" || want == p.status[id] {
		p.reconcileUsage(t)
		return
	}
	at, end, ok := p.taskEnd(t, want)
	if !ok {
		// No event to end it in: a write without events would still be
		// recorded, and the daemon refuses one.
		p.s.skip(p.r.id, "state/runs/"+p.r.id+"/tasks.json", 0, 0,
			"task %s: status %q is not a pi-crew status: left %s", id, clip(want), p.status[id])
		p.reconcileUsage(t)
		return
	}
	p.begin("reconcile:task:" + id + ":" + want)
	needsStart := want == "running" || want == "waiting" || want == "completed" || want == "failed" ||
		want == "needs_attention"
	if needsStart && p.status[id] != "running" && (want == "running" || want == "waiting" || !p.started[id]) {
		p.add(t.StartedAt.ms, &events.TaskStarted{TaskID: id, Role: t.Role, Agent: t.Agent, Cwd: t.Cwd})
	}
	if end != nil {
		p.add(at, end)
	}
	p.status[id] = want
	p.reconcileUsage(t)
}

// taskEnd is the event that puts task t in status want, and its time: nil
// for running, which task.started (reconcileTask) reaches. ok is false for
// a status outside pi-crew's task machine (D§2.4): this switch is the one
// list of them the import knows.
func (p *planner) taskEnd(t task, want string) (at int64, end any, ok bool) {
	id, finished := t.ID, t.FinishedAt.ms
	switch want {
	case "running":
		return 0, nil, true
	case "queued":
		return p.r.manifest.UpdatedAt.ms, &events.TaskRetried{TaskID: id,
			Reason: "import: status from tasks.json"}, true
	case "waiting":
		var q park
		if w := t.Waiting; w != nil {
			q = p.question("state/runs/"+p.r.id+"/tasks.json", 0, "task "+id+": waiting", w.AskedAt.ms, w.QuestionID,
				w.Deadline.ms, w.Options)
		}
		p.parked[id] = q
		return q.at, &events.TaskWaiting{TaskID: id, QuestionID: q.question, AskedAt: q.at, Deadline: q.deadline,
			Options: q.options}, true
	case "completed":
		return finished, &events.TaskCompleted{TaskID: id, FailureCause: t.FailureCause}, true
	case "failed":
		return finished, &events.TaskFailed{TaskID: id, Error: t.Error, FailureCause: t.FailureCause}, true
	case "needs_attention":
		return finished, &events.TaskNeedsAttention{TaskID: id, Error: t.Error, FailureCause: t.FailureCause}, true
	case "cancelled":
		return finished, &events.TaskCancelled{TaskID: id, Reason: "import: status from tasks.json"}, true
	case "skipped":
		return finished, &events.TaskSkipped{TaskID: id, Reason: "import: status from tasks.json"}, true
	}
	return 0, nil, false
}

func (p *planner) reconcileUsage(t task) {
	if t.Usage == nil {
		return
	}
	u := t.Usage
	if bad := usageProblem(u.Input, u.Output, u.CacheRead, u.CacheWrite, u.Turns, u.Cost); bad != "" {
		// NB: refused whole, as task.usage refuses such a report: a count below zero lowered the run's budget use
		// (Σ of its tasks' usage) below what its other tasks spent, and the abort threshold with it.
		p.s.skip(p.r.id, "state/runs/"+p.r.id+"/tasks.json", 0, 0,
			"task %s: usage %s: not imported (crewlog's task.usage refuses such a report)", t.ID, bad)
		return
	}
	p.begin("usage:" + t.ID + ":" + usageDigest(t))
	p.add(max(t.FinishedAt.ms, t.StartedAt.ms), &events.TaskUsage{TaskID: t.ID, Input: u.Input, Output: u.Output,
		CacheRead: u.CacheRead, CacheWrite: u.CacheWrite, Cost: u.Cost, Turns: u.Turns})
}

// usageDigest names what task t's usage write records: its counters and cost, and the attempt they are of (its
// startedAt and finishedAt). NB: pi-crew writes a task's usage at the end of each attempt, and the log keeps the last
// task.usage of a task (projections replace it): under one id per task, a retried task's new usage was answered as a
// write already recorded, and its run's budget use kept the first attempt's. The same usage of the same attempt read
// again is the same write; a changed one, or the same one of a later attempt, is a new one.
func usageDigest(t task) string {
	u := t.Usage
	h := sha256.Sum256(fmt.Appendf(nil, "%d,%d,%d,%d,%d,%s,%d,%d", u.Input, u.Output, u.CacheRead,
		u.CacheWrite, u.Turns, strconv.FormatFloat(u.Cost, 'g', -1, 64), t.StartedAt.ms, t.FinishedAt.ms))
	return hex.EncodeToString(h[:8])
}

// usageProblem names what makes a usage one crewlog's task.usage refuses: a counter outside 0..events.MaxUsageTokens
// (events.UsageCountOK), or a cost that is not a finite number ≥ 0 (events.UsageCostOK; decoded from JSON, it is
// below zero); "" when there is nothing.
func usageProblem(input, output, cacheRead, cacheWrite, turns int64, cost float64) string {
	switch field, n := events.UsageProblem(events.TaskUsage{Input: input, Output: output, CacheRead: cacheRead,
		CacheWrite: cacheWrite, Turns: turns, Cost: cost}); field {
	case "":
		return ""
	case "cost":
		return fmt.Sprintf("cost %g is below zero", cost)
	default:
		return fmt.Sprintf("%s %d is not a count of 0..%d", field, n, int64(events.MaxUsageTokens))
	}
}

// reconcileShadow ends a delegation as its shadow record says; a shadow
// without delegate events becomes a bare task.created of kind "shadow".
func (p *planner) reconcileShadow(t task) {
	st := p.dels[t.ID]
	if st == "" {
		p.begin("shadow:" + t.ID)
		p.add(t.StartedAt.ms, &events.TaskCreated{TaskID: t.ID, Role: t.Role,
			Agent: firstOf(t.Agent, events.DelegateAgent), Title: t.Title, Cwd: t.Cwd, DependsOn: []string{},
			Depth: t.Depth, Model: t.Model, Kind: events.TaskKindShadow})
		p.s.skip(p.r.id, "state/runs/"+p.r.id+"/tasks.json", 0, 0,
			"shadow %s has no delegate.admitted in the events (lost or compacted): imported as a shadow task "+
				"without a delegation, parent unknown", t.ID)
		p.status[t.ID] = "queued"
		p.reconcileTask(t)
		return
	}
	want := map[string]string{"running": "running", "completed": "completed", "failed": "failed",
		"cancelled": "cancelled"}[t.Status]
	if want == "" || want == st || terminal(st) {
		return
	}
	parent := p.parentOf(t.ID)
	p.begin("reconcile:delegate:" + t.ID + ":" + want)
	if want == "running" {
		p.add(t.StartedAt.ms, &events.DelegateSpawned{TaskID: parent, SubID: t.ID})
		p.dels[t.ID] = "running"
		return
	}
	p.settle(t.FinishedAt.ms, parent, t.ID, want)
}

// parentOf is the parent task of an admitted delegation.
func (p *planner) parentOf(subID string) string { return p.parents[subID] }

// reconcileAllocation makes the parent's ledger match tasks.json: its write
// carries the spend tasks.json shows, and records what the log lacks of it
// (events.ImportTopUpSubID). Spend only grows (SPEC §4.2), so a file that
// shows less than the events reserved (pi-crew 0.10.1's settle-time
// refunds) is reported, not undone.
func (p *planner) reconcileAllocation(t task) {
	a := t.Allocation
	if a == nil {
		return
	}
	have := p.spent[t.ID]
	switch {
	case a.TokensSpent > have || !p.accounts[t.ID]:
		// NB: the spend to reach, not what this history lacks of it: a compacted history lacks admissions whose
		// reservations the log holds already, so what the write records is counted from the log (ImportTopUpSubID).
		p.begin(fmt.Sprintf("reconcile:allocation:%s:%d", t.ID, a.TokensSpent))
		p.add(p.r.manifest.UpdatedAt.ms, &events.BudgetReserved{TaskID: t.ID, SubID: events.ImportTopUpSubID,
			Tokens: a.TokensSpent, GrantedTokens: a.TokensGranted})
		p.spent[t.ID], p.accounts[t.ID] = a.TokensSpent, true
	case a.TokensSpent < have:
		p.s.skip(p.r.id, "state/runs/"+p.r.id+"/tasks.json", 0, 0,
			"task %s: tasks.json shows %d tokens spent, the imported reservations %d; crewlog never refunds, "+
				"so %d stays", t.ID, a.TokensSpent, have, have)
	}
}

// importedBudget is a manifest's budgetTotal as crewlog records it. NB: a
// flexInt cannot tell 0 from absent (pi-crew writes both "" and null), so 0
// imports as unset, as crewlog read it before a defined 0 was kept.
func importedBudget(n flexInt) *int64 {
	if n == 0 {
		return nil
	}
	return new(int64(n))
}
