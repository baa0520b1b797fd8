package commands

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// MaxImportEvents bounds the events of one Import: an import write is one
// source record (a line, a message, a status) and the few events it maps
// to, never a whole file.
const MaxImportEvents = 16

// MaxImportSourceChars bounds an Import's Source, in chars (code points), as
// the broker's import.append counts its source param.
const MaxImportSourceChars = 64

// ImportIDPrefix starts every import's command id ("import:<runId>:…" for
// a source record, "import:picrew:checkpoint:…" for the follower's
// checkpoints). An import's
// id is recorded under events.EnginePrincipal, beside the engine's own
// commands (the clock's "expire:…" and "ask-expire:…", the migrations'
// "migrate:…"): an import that recorded an outcome under one of theirs
// would answer it from then on, and an expiry so answered would never time
// its delegation out. So the import's ids are this namespace alone.
const ImportIDPrefix = "import:"

// maxImportTimeMs is the latest source time an event may carry: event
// times are unix nanoseconds in an int64 (up to the year 2262).
const maxImportTimeMs = 9e12

// Import appends events another system recorded (pi-crew's files, read by
// a follower) as they were mapped, with their own times: the import's
// decisions were taken by that system, so crewlog records them instead of
// deciding them again. It is the engine's command: the broker submits it
// under events.EnginePrincipal for the admin only, and its command id names
// the source record (the same ids as the one-shot import, so neither can
// double the other).
//
// Its events go to one run's stream (RunID), or, for import.checkpoint
// alone, to events.ImportStream. Types that only crewlog itself may write
// (credentials, engine config, store migrations, quotas) are refused, as is
// a run.created for a run that exists and any other event for a run that
// does not; within those rules the events are trusted as the one-shot
// import trusts the files (projections ignore what refers to nothing),
// except a question's deadline, which is recorded at most MaxAskTimeoutSec
// after the event's time (importedAskDeadline), its id and options, refused
// outside what wait.request records (importedQuestionProblem), a
// delegation's deadline, at most MaxTimeoutSec after it
// (importedAdmission), a task's or delegation's depth, refused outside
// 0..MaxMaxDepth (importedDepthProblem), a task's dependsOn, refused beyond what task.create takes
// (importedDependsOnProblem), a task's usage, refused
// with counters task.usage refuses (importedUsageProblem), a reservation's
// or charge's tokens, refused outside 0..MaxUsageTokens, and a reservation's grant, refused outside
// 0..MaxBudgetTotal (importedSpendProblem), a run's budget,
// refused as run.create refuses it (importedBudgetProblem), a delegation's
// subId, refused when it is not an id (safeID) or names a workflow task of
// the run (workflowTask), a free text, refused when it is longer than
// crewlog's own command records it (importedTextProblem), an id longer than any
// crewlog records, in chars or in the bytes JSON writes it in, or a task id task.create refuses (a reserved word, or
// an empty taskId: importedIDProblem), a
// foreign event's seq below 1, which no event of its source has (importedForeignProblem), and
// an allocation
// top-up (events.ImportTopUpSubID), recorded as what its task lacks of the
// spend it carries (importedTopUp).
type Import struct {
	// Source names the importing system (events.ForeignSourcePicrew); it
	// becomes the events' correlation id after events.ImportCorrelation.
	Source string
	RunID  string
	Events []ImportedEvent
}

// ImportedEvent is one event of an Import: its type, its time in the
// source (unix ms; 0 means the engine clock) and its payload (a pointer to
// the payload struct of Type).
type ImportedEvent struct {
	Type    string
	TimeMs  int64
	Payload any
}

// EncodeMsgpack encodes the payload with the events codec (type, time,
// payload bytes), so an Import is fingerprinted by what it would record and
// survives forwarding to another engine with its typed payloads.
func (e ImportedEvent) EncodeMsgpack(enc *msgpack.Encoder) error {
	b, err := events.EncodePayload(e.Payload)
	if err != nil {
		return fmt.Errorf("commands: import: encode %s: %w", e.Type, err)
	}
	// NB: one msgpack value (an array), so a reader skipping it finds its end.
	if err := enc.EncodeArrayLen(3); err != nil {
		return err
	}
	return enc.EncodeMulti(e.Type, e.TimeMs, b)
}

// DecodeMsgpack is EncodeMsgpack's inverse.
func (e *ImportedEvent) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != 3 {
		return fmt.Errorf("commands: import: an event of %d fields", n)
	}
	var b []byte
	if err := dec.DecodeMulti(&e.Type, &e.TimeMs, &b); err != nil {
		return err
	}
	p, err := events.DecodePayload(e.Type, events.SchemaVersion(e.Type), b)
	if err != nil {
		return fmt.Errorf("commands: import: decode %s: %w", e.Type, err)
	}
	e.Payload = p
	return nil
}

// DecodeMsgpack decodes an Import as reflection does, but refuses a nil in
// place of an event: msgpack gives a type with a decoder of its own (as
// ImportedEvent) its zero value for a nil without asking it, and an event
// without a payload is one that EncodeMsgpack cannot write again.
func (c *Import) DecodeMsgpack(dec *msgpack.Decoder) error {
	type fields Import // NB: without this method, so reflection decodes it
	if err := dec.Decode((*fields)(c)); err != nil {
		return err
	}
	for i, e := range c.Events {
		if e.Payload == nil {
			return fmt.Errorf("commands: import: event %d is nil", i)
		}
	}
	return nil
}

// Kind implements Command.
func (*Import) Kind() string { return "import.append" }

// ImportResult is the answer to an Import.
type ImportResult struct {
	Appended int `json:"appended"`
}

// importable are the event types an Import may carry in a run's stream:
// what a runtime's own history records. Everything else (credentials,
// engine config, store migrations, quota and fair-share decisions) is
// crewlog's own and never comes from elsewhere.
func importable(typ string) bool {
	switch typ {
	case events.TypeForeignImported, events.TypeSteerPushed:
		return true
	case events.TypeRunQuotaExceeded, events.TypeTaskBudgetFairShare:
		return false
	}
	family, _, _ := strings.Cut(typ, ".")
	switch family {
	case "run", "task", "delegate", "budget", "mailbox", "ask":
		return events.IsKnown(typ)
	}
	return false
}

func (c *Import) decide(s *projections.State, env *Env) (Decision, error) {
	if !charsOfUTF8(c.Source, MaxImportSourceChars) {
		return Decision{}, badParams("import.append: source must be 1..%d chars of UTF-8", MaxImportSourceChars)
	}
	if n := len(c.Events); n == 0 || n > MaxImportEvents {
		return Decision{}, badParams("import.append: a write carries 1..%d events", MaxImportEvents)
	}
	checkpoint := c.RunID == events.ImportStream
	if !checkpoint && !safeRunID(c.RunID) {
		return Decision{}, badParams("import.append: runId must be 1..%d chars of [A-Za-z0-9_-]", MaxRunIDChars)
	}
	_, exists := s.Run(c.RunID)
	if _, served := s.Credential(c.RunID, events.OrchestratorKey); exists && served {
		// NB: an import records no credential, so a run with an orchestrator credential was created through the
		// socket, and its principals decide what it records, not files that name the same run id (a crew root
		// whose runtime talks to crewd too, a run directory a worker wrote under that name).
		return Decision{}, badParams("import.append: run %q is served through the socket (it has an orchestrator "+
			"credential): an import does not write to it", c.RunID)
	}
	out := make([]events.Event, 0, len(c.Events))
	var subIDs []string  // the delegations this write admits, at most MaxImportEvents
	var created []string // the workflow tasks this write creates, at most MaxImportEvents
	for i, ie := range c.Events {
		switch {
		case checkpoint != (ie.Type == events.TypeImportCheckpoint):
			return Decision{}, badParams("import.append: event %d: import.checkpoint goes to %s, and only it", i,
				events.ImportStream)
		case !checkpoint && !importable(ie.Type):
			return Decision{}, badParams("import.append: event %d: type %q cannot be imported", i, ie.Type)
		case ie.Payload == nil || !payloadOf(ie.Type, ie.Payload):
			return Decision{}, badParams("import.append: event %d: payload is not a %s", i, ie.Type)
		}
		if bad := importedPayloadProblem(ie.Type, ie.Payload); bad != "" {
			return Decision{}, badParams("import.append: event %d: %s", i, bad)
		}
		switch {
		case ie.TimeMs < 0 || ie.TimeMs > maxImportTimeMs:
			return Decision{}, badParams("import.append: event %d: time must be 0..%d (unix ms)", i,
				int64(maxImportTimeMs))
		case ie.Type == events.TypeRunCreated && exists:
			return Decision{}, badParams("import.append: run %q exists", c.RunID)
		case !checkpoint && ie.Type != events.TypeRunCreated && !exists:
			return Decision{}, reject(CodeNoManifest, "no-manifest", "run %q not found", c.RunID)
		}
		if ie.Type == events.TypeRunCreated {
			exists = true
		}
		if a := admissionOf(ie.Payload); a != nil {
			switch {
			case !safeID(a.SubID):
				return Decision{}, badParams("import.append: event %d: delegation id must be 1..%d chars of "+
					"[A-Za-z0-9_-]", i, MaxIDChars)
			case admittedBefore(s, c.RunID, a.SubID) || slices.Contains(subIDs, a.SubID):
				return Decision{}, badParams("import.append: event %d: delegation %q was admitted already", i,
					a.SubID)
			case workflowTask(s, c.RunID, a.SubID) || slices.Contains(created, a.SubID):
				return Decision{}, badParams("import.append: event %d: delegation %q names a workflow task "+
					"of run %q", i, a.SubID, c.RunID)
			}
			subIDs = append(subIDs, a.SubID)
		}
		if t := workflowCreated(ie.Payload); t != "" {
			created = append(created, t)
		}
		// NB: the source time, but never after the engine clock: the source writes it as freely as the rest (up to
		// the year 2255), and what counts from an event's time moved with it — a delegation's deadline held its
		// slot, a question's kept its run parked, a slot refusal held every other run to its share, for centuries.
		at := env.Now
		if ie.TimeMs > 0 {
			at = min(ie.TimeMs*1e6, env.Now)
		}
		payload, err := importedAdmission(ie.Payload, at/1e6)
		if err != nil {
			return Decision{}, badParams("import.append: event %d: %v", i, err)
		}
		payload = importedAskDeadline(payload, at/1e6)
		if r := events.TopUpOf(payload); r != nil {
			payload = importedTopUp(*r, spentBefore(s, c.RunID, r.TaskID, out))
		}
		out = append(out, events.Event{
			Stream: c.RunID, Type: ie.Type, SchemaVersion: events.SchemaVersion(ie.Type), Time: at,
			CommandID: env.CommandID, CorrelationID: events.ImportCorrelation + c.Source,
			// NB: the admin actor with the import correlation is what the
			// one-shot import records; events.EventPrincipal maps it to
			// the engine, whose outcome this is.
			Actor: events.Actor{Role: events.RoleAdmin}, Payload: payload,
		})
	}
	return Decision{Events: out, Result: ImportResult{Appended: len(out)}}, nil
}

// admissionOf is p, a delegate.admitted given as a pointer or a struct; nil for any other payload. NB: the caller's
// payload: not to be changed.
func admissionOf(p any) *events.DelegateAdmitted { return payloadAs[events.DelegateAdmitted](p) }

// admittedBefore reports whether subID holds a slot, for any run, or names a delegation of run runID already. NB:
// the slot pool is keyed by subId alone (crewlog mints its own from UUIDs): an import, whose source chooses its
// subIds, admitting one another run holds would move that run's slot to its own, its settlement would free it, and
// the snapshot of two runs holding one subId is refused. A subId whose delegation another run settled holds nothing.
func admittedBefore(s *projections.State, runID, subID string) bool {
	if _, held := s.SlotHolder(subID); held {
		return true
	}
	_, ok := s.Delegation(runID, subID)
	return ok
}

// workflowTask reports whether taskID names a workflow task of run runID. NB: a delegation's subId names its shadow
// task, and the engine mints it, so none of its delegations shares an id with a task of its run; an imported one
// naming a workflow task took that task for its shadow, and its settlement, or its expiry, ended the workflow task.
// A shadow task is one an import created without its delegation (its delegate events lost), whose delegation it is.
func workflowTask(s *projections.State, runID, taskID string) bool {
	_, ok := s.TaskStatus(runID, taskID)
	return ok && !s.IsShadow(runID, taskID)
}

// workflowCreated is the task id of p, a task.created of a workflow task given as a pointer or a struct; "" for any
// other payload.
func workflowCreated(p any) string {
	if t := payloadAs[events.TaskCreated](p); t != nil && t.Kind != events.TaskKindShadow {
		return t.TaskID
	}
	return ""
}

// importedAskDeadline is p, an ask.requested or task.waiting given as a pointer or a struct, as a copy whose deadline
// is at most MaxAskTimeoutSec after atMs, the time it is recorded at (never after the engine clock): pi-crew's broker
// clamps every question so (R5), and only the engine clock ends a question nobody answers, so a later one a file
// names (a damaged or forged line, up to the year 2255) would keep the question pending — its run hot and parked,
// its task waiting — until then. An empty options list becomes none, as the log records it (omitempty): kept, the
// state folded live held it where the same state rebuilt from the log did not. Any other payload, or a deadline
// within the clamp and no empty list, is p itself (a struct given by value comes back as a pointer to its copy). The
// caller's payload is not changed.
func importedAskDeadline(p any, atMs int64) any {
	latest := atMs + MaxAskTimeoutSec*1000 // NB: atMs is at most maxImportTimeMs: no overflow
	emptied := func(o []string) bool { return o != nil && len(o) == 0 }
	switch a := p.(type) {
	case events.AskRequested:
		return importedAskDeadline(&a, atMs) // a is a copy already
	case events.TaskWaiting:
		return importedAskDeadline(&a, atMs)
	case *events.AskRequested:
		if a.Deadline > latest || emptied(a.Options) {
			c := *a
			c.Deadline, c.Options = min(c.Deadline, latest), noneIfEmpty(c.Options)
			return &c
		}
	case *events.TaskWaiting:
		if a.Deadline > latest || emptied(a.Options) {
			c := *a
			c.Deadline, c.Options = min(c.Deadline, latest), noneIfEmpty(c.Options)
			return &c
		}
	}
	return p
}

// noneIfEmpty is o, or nil when o is empty.
func noneIfEmpty(o []string) []string {
	if len(o) == 0 {
		return nil
	}
	return o
}

// importedPayloadProblem says what makes p, the payload of an imported event of type typ, one crewlog does not record
// (checkpointProblem, importedUsageProblem, importedBudgetProblem, importedDepthProblem, importedDependsOnProblem,
// importedSpendProblem, importedTextProblem, importedQuestionProblem, importedIDProblem, importedWordProblem,
// importedForeignProblem); "" when there is nothing.
func importedPayloadProblem(typ string, p any) string {
	if err := checkpointProblem(p); err != nil {
		return err.Error()
	}
	if bad := importedUsageProblem(p); bad != "" {
		return bad
	}
	if bad := importedBudgetProblem(p); bad != "" {
		return "run.created: " + bad
	}
	if bad := importedDepthProblem(p); bad != "" {
		return bad
	}
	for _, problem := range importedFieldProblems {
		if bad := problem(p); bad != "" {
			return typ + ": " + bad
		}
	}
	return ""
}

// importedFieldProblems are the checks of importedPayloadProblem whose answer is prefixed with the event's type, in
// the order they are made.
var importedFieldProblems = []func(p any) string{importedDependsOnProblem, importedSpendProblem, importedTextProblem,
	importedQuestionProblem, importedIDProblem, importedWordProblem, importedForeignProblem}

// importedQuestionProblem says what makes p, an ask.requested or task.waiting given as a pointer or a struct, a
// question wait.request would not record; "" when there is nothing, or when p is another payload. Its id must be one
// wait.resolve takes (1..MaxQuestionIDChars chars): a task parked on any other waited for good, as nothing answers a
// question it cannot name (a follower reconciles a live run only once it has finished). Its options must be
// 1..MaxAskOptions strings of 1..MaxAskOptionChars chars (an empty list is none: importedAskDeadline), as every
// read of the question and of its task's park marker copies them.
func importedQuestionProblem(p any) string {
	var id string
	var options []string
	if a := payloadAs[events.AskRequested](p); a != nil {
		id, options = a.QuestionID, a.Options
	} else if w := payloadAs[events.TaskWaiting](p); w != nil {
		id, options = w.QuestionID, w.Options
	} else {
		return ""
	}
	if !events.QuestionIDOK(id) {
		return fmt.Sprintf("questionId must be 1..%d chars", MaxQuestionIDChars)
	}
	if many, badOption := events.AskOptionsProblem(options); many || badOption {
		return fmt.Sprintf("options must hold 1..%d strings of 1..%d chars", MaxAskOptions, MaxAskOptionChars)
	}
	return ""
}

// importedUsageProblem is what makes p, a task.usage given as a pointer or a struct, one task.usage itself refuses
// (countsProblem); "" when there is nothing, or when p is another payload. NB: a usage replaces its task's last,
// and a counter below zero lowered the run's budget use below what its other tasks spent.
func importedUsageProblem(p any) string {
	if u := payloadAs[events.TaskUsage](p); u != nil {
		return countsProblem(*u)
	}
	return ""
}

// importedBudgetProblem is what makes p, a run.created given as a pointer or a struct, a budget run.create itself
// refuses (budgetProblem); "" when there is nothing, or when p is another payload.
func importedBudgetProblem(p any) string {
	if r := payloadAs[events.RunCreated](p); r != nil {
		return budgetProblem(r.BudgetTotal, r.BudgetWarning, r.BudgetAbort)
	}
	return ""
}

// importedDepthProblem says what makes p, a task.created or delegate.admitted given as a pointer or a struct, carry
// a depth the engine never records (outside 0..MaxMaxDepth: task.create's bound, and the most an admission's
// childDepth can be); "" when there is nothing, or when p is another payload. NB: a shadow's depth decides whether
// credential.issue gives it a credential and how deep its own delegations go.
func importedDepthProblem(p any) string {
	depth := 0
	if t := payloadAs[events.TaskCreated](p); t != nil {
		depth = t.Depth
	} else if a := admissionOf(p); a != nil {
		depth = a.ChildDepth
	}
	if !events.DepthOK(depth) {
		return fmt.Sprintf("depth %d is not 0..%d", depth, MaxMaxDepth)
	}
	return ""
}

// importedDependsOnProblem says what makes p, a task.created given as a pointer or a struct, list dependencies
// task.create never records (more than MaxDependsOn, or an id that is not 1..MaxIDChars chars of at most MaxIDChars
// bytes in JSON: events.DependsOnCountOK, events.DependencyOK); "" when there is nothing, or when p is another
// payload. NB: every read of the task, snapshot of its run and page of the dashboard copies the list.
func importedDependsOnProblem(p any) string {
	t := payloadAs[events.TaskCreated](p)
	if t == nil {
		return ""
	}
	bad := !events.DependsOnCountOK(t.DependsOn)
	for _, d := range t.DependsOn {
		bad = bad || !events.DependencyOK(d)
	}
	if bad {
		return fmt.Sprintf("dependsOn must list at most %d task ids, each of 1..%d chars, of at most %d "+
			"bytes in JSON", MaxDependsOn, MaxIDChars, MaxIDChars)
	}
	return ""
}

// payloadAs is p, a payload given as a pointer to a T or as a T, as a *T (the caller's pointer, or a pointer to a
// copy of the struct); nil for any other payload. NB: the caller's payload: not to be changed.
func payloadAs[T any](p any) *T { return events.PayloadAs[T](events.Event{Payload: p}) }

// payloadOf reports whether p is the payload struct (pointer) of typ.
func payloadOf(typ string, p any) bool {
	t, ok := events.TypeOf(p)
	return ok && t == typ
}

// checkpointOf is p, an import checkpoint given as a pointer or a struct;
// nil for any other payload.
func checkpointOf(p any) *events.ImportCheckpoint { return payloadAs[events.ImportCheckpoint](p) }

// checkpointProblem is what makes p, an import checkpoint (a pointer or a
// struct), one no import writes; nil when there is nothing, or when p is
// another payload.
func checkpointProblem(p any) error {
	c := checkpointOf(p)
	if c == nil {
		return nil
	}
	// NB: a reader of the log refuses what Validate refuses
	// (events.DecodePayload): recorded, it would be damage.
	if err := c.Validate(); err != nil {
		return err
	}
	// NB: import.checkpoints hands a page's last path back as its cursor: a
	// path it would refuse there, or one JSON cannot carry back unchanged,
	// would stop its paging at that page for good (an empty one is never
	// after a cursor, so never listed).
	if !charsOfUTF8(c.Path, events.MaxImportPathChars) {
		return fmt.Errorf("path must be 1..%d chars of UTF-8", events.MaxImportPathChars)
	}
	return nil
}

// importedAdmission is p, or, when p is a delegate.admitted with a timeout and no deadline, or with a deadline past
// the longest a delegation runs, a copy whose deadline counts from atMs, the time it is recorded at (never after the
// engine clock): an importer that leaves the time to the daemon (a pi-crew admission with no time, in a run with no
// createdAt) cannot know it, and a deadline of 0 expires the delegation as soon as it is recorded. The deadline is at
// most MaxTimeoutSec after atMs (the bound delegate.request and the one-shot import's plan hold to): the admission
// holds a slot of the daemon-wide pool until the engine clock times it out, so a later deadline a file names (a
// damaged or forged line, up to the year 2255) would refuse every other run's delegations slots-exhausted until then.
// The caller's payload is not changed.
func importedAdmission(p any, atMs int64) (any, error) {
	a := admissionOf(p)
	if a == nil {
		return p, nil
	}
	d := *a
	if d.Deadline < 0 || d.Deadline > maxImportTimeMs {
		// NB: a deadline is a time like an event's: the clock's expiry adds its grace to it, which one near the
		// largest int64 would wrap into the past.
		return nil, fmt.Errorf("delegate.admitted: deadline %d is not a time (0..%d, unix ms)", d.Deadline,
			int64(maxImportTimeMs))
	}
	latest := atMs + MaxTimeoutSec*1000 // NB: atMs is at most maxImportTimeMs: no overflow
	switch {
	case d.Deadline > latest:
		d.Deadline = latest
	case d.Deadline != 0 || !(d.TimeoutSec > 0):
		return p, nil
	case d.TimeoutSec > MaxTimeoutSec: // NB: +Inf too; NaN is not above 0
		d.Deadline = latest
	default:
		d.Deadline = atMs + int64(d.TimeoutSec*1000)
	}
	return &d, nil
}
