package commands

import (
	"strings"
	"unicode/utf8"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Mailbox bounds (D§7.5).
const (
	MaxRecipients   = 64
	MaxSubjectChars = events.MaxSubjectChars
	// MaxMessageIDs bounds the ids one mailbox.deliver / mailbox.ack names.
	MaxMessageIDs = 1024
)

// Special recipients of msg.send and escalate (D§7.5): events' recipient names, which no task may take.
const (
	ToAll    = events.RecipientAll
	ToParent = events.RecipientParent
	ToGroup  = events.RecipientGroup
)

// orchestratorSender is the From of messages the orchestrator (or an admin
// acting for it) sends.
const orchestratorSender = events.OrchestratorKey

// MessageSend is msg.send (D§7.5): one mailbox.appended per recipient, all in
// one batch, so a message reaches every recipient or none.
//
// The orchestrator may address any task of the run, the run inbox
// ("parent") or "all", with any kind. A worker (FromTask set) is bounded
// (M2): to ∈ {"parent", "group", a task of its run}, kind notify or message,
// and the message is from its own task.
type MessageSend struct {
	RunID string
	// FromTask is the sending worker's task id, from its credential; empty
	// when the orchestrator sends.
	FromTask string
	// To lists the recipients: task ids, ToParent, ToAll, ToGroup.
	// Duplicates are sent once.
	To   []string
	Body string
	// MessageKind is the mailbox kind (default message); Kind is the
	// command's method name.
	MessageKind string
	Priority    string // default normal
	ReplyTo     string
	Subject     string
	// QuestionID (orchestrator only, kind response) names the parked
	// question the message answers: pi-crew's ask tool takes only a
	// response carrying exactly that id.
	QuestionID string
}

// Kind implements Command.
func (*MessageSend) Kind() string { return "msg.send" }

// SendResult is the answer to msg.send. MessageID is the id shared by the
// per-recipient copies, whose ids are <MessageID>_<label>.
type SendResult struct {
	MessageID          string `json:"messageId"`
	RecipientCount     int    `json:"recipientCount"`
	DurableStatus      string `json:"durableStatus"`
	LiveDeliveryStatus string `json:"liveDeliveryStatus"`
}

// bodyTooLarge refuses a message body longer than MaxBodyChars as pi-crew's
// broker does (D§7.5): oversize-frame, "<method>: body too large". Only a
// frame larger than the default cap can carry such a body.
func bodyTooLarge(method string) *RejectedError {
	return reject(CodeOversizeFrame, "body-too-large", "%s: body too large", method)
}

// recipient is one resolved destination: the mailbox key (a task id or
// events.RunInbox) and the label its copy's id ends with.
type recipient struct{ box, label string }

// kindAndPriority are the message's kind and priority: message and normal
// where it names none.
func (c *MessageSend) kindAndPriority() (kind, priority string) {
	kind, priority = c.MessageKind, c.Priority
	if kind == "" {
		kind = events.KindMessage
	}
	if priority == "" {
		priority = events.PriorityNormal
	}
	return kind, priority
}

// CheckParams refuses c for what its params decide alone, as decide does
// first, before it reads any state: a *RejectedError, or nil. The broker
// leaves a command that fails it to the engine, so that the answer to it
// is the engine's.
func (c *MessageSend) CheckParams() error {
	worker := c.FromTask != ""
	kind, priority := c.kindAndPriority()
	switch {
	case worker && kind != events.KindMessage && kind != events.KindNotify:
		return badParams("msg.send: worker kind must be 'notify' or 'message'")
	case !validKind(kind):
		return badParams("msg.send: kind must be message, notify, steer, follow-up, response or group_join")
	case !validPriority(priority):
		return badParams("msg.send: priority must be urgent, normal or low")
	case c.Body == "":
		return badParams("msg.send: body must be 1..%d chars", MaxBodyChars)
	case utf8.RuneCountInString(c.Body) > MaxBodyChars:
		return bodyTooLarge(c.Kind())
	case utf8.RuneCountInString(c.Subject) > MaxSubjectChars:
		return badParams("msg.send: subject must be at most %d chars", MaxSubjectChars)
	case longerThan(c.ReplyTo, MaxIDChars):
		return badParams("msg.send: replyTo must be at most %d chars", MaxIDChars)
	case longerThan(c.QuestionID, MaxQuestionIDChars):
		return badParams("msg.send: questionId must be at most %d chars", MaxQuestionIDChars)
	case c.QuestionID != "" && kind != events.KindResponse:
		return badParams("msg.send: questionId goes with kind 'response' only")
	case len(c.To) == 0 || len(c.To) > MaxRecipients:
		return badParams("msg.send: recipient count out of range")
	}
	return nil
}

func (c *MessageSend) decide(s *projections.State, env *Env) (Decision, error) {
	if err := c.CheckParams(); err != nil {
		return Decision{}, err
	}
	worker := c.FromTask != ""
	kind, priority := c.kindAndPriority()
	if _, ok := s.Run(c.RunID); !ok {
		return Decision{}, reject(CodeNoManifest, "no-manifest", "run %q not found", c.RunID)
	}
	from := orchestratorSender
	if worker {
		if _, ok := s.Task(c.RunID, c.FromTask); !ok {
			return Decision{}, reject(CodeNoTask, "no-task", "task %q not found in run %q", c.FromTask, c.RunID)
		}
		from = c.FromTask
	}
	rcpts, err := c.recipients(s)
	if err != nil {
		return Decision{}, err
	}
	if len(rcpts) == 0 || len(rcpts) > MaxRecipients {
		return Decision{}, badParams("msg.send: recipient count out of range")
	}
	id := messageID(env)
	evs := make([]events.Event, 0, len(rcpts))
	for _, r := range rcpts {
		evs = append(evs, env.event(c.RunID, events.TypeMailboxAppended, &events.MailboxAppended{
			ID: id + "_" + r.label, To: r.box, From: from, Kind: kind, Priority: priority,
			DeliveryMode: events.DeliveryNextTurn, Body: c.Body, Subject: c.Subject, ReplyTo: c.ReplyTo,
			QuestionID: c.QuestionID,
		}))
	}
	return Decision{Events: evs, Result: SendResult{
		MessageID: id, RecipientCount: len(rcpts), DurableStatus: "ok", LiveDeliveryStatus: "ok",
	}}, nil
}

// Mailboxes are the mailboxes s would have msg.send append a copy to (task
// ids, or events.RunInbox), in order; nil when s would refuse it for its
// recipients. The broker measures each copy as msg.inbox would answer it
// before it sends the command on.
func (c *MessageSend) Mailboxes(s *projections.State) []string {
	rcpts, err := c.recipients(s)
	if err != nil || len(rcpts) == 0 || len(rcpts) > MaxRecipients {
		return nil
	}
	boxes := make([]string, 0, len(rcpts))
	for _, r := range rcpts {
		boxes = append(boxes, r.box)
	}
	return boxes
}

// recipients resolves To into mailboxes, in the order given (expansions in
// task creation order), each once.
func (c *MessageSend) recipients(s *projections.State) ([]recipient, error) {
	worker := c.FromTask != ""
	var out []recipient
	seen := make(map[string]bool, len(c.To))
	add := func(box, label string) {
		if !seen[label] {
			seen[label] = true
			out = append(out, recipient{box: box, label: label})
		}
	}
	for _, to := range c.To {
		switch {
		case to == ToParent:
			add(events.RunInbox, ToParent)
		case to == ToAll && !worker:
			// NB: past MaxRecipients the message is refused whatever else it names: a run's tasks, ended ones
			// included, can number in the hundreds of thousands, and the walk stops there.
			s.EachWorkflowTask(c.RunID, func(t projections.Task) bool {
				add(t.TaskID, t.TaskID)
				return len(out) <= MaxRecipients
			})
		case to == ToGroup && worker:
			s.EachLiveTask(c.RunID, func(t projections.Task) bool {
				if !t.Shadow() && t.TaskID != c.FromTask {
					add(t.TaskID, t.TaskID)
				}
				return len(out) <= MaxRecipients
			})
		case to == ToAll || to == ToGroup:
			if worker {
				return nil, reject(CodeForbidden, "forbidden",
					"msg.send: a worker may send only to parent, group or a task of its run")
			}
			return nil, badParams("msg.send: %q is for workers; the orchestrator names tasks or \"all\"", to)
		default:
			if _, ok := s.Task(c.RunID, to); !ok {
				return nil, badParams("msg.send: recipient %q is not a task of run %q", to, c.RunID)
			}
			add(to, to)
		}
	}
	return out, nil
}

// validKind and validPriority: a word of D§2.6, which a command that sends a message names (an import may leave it
// empty: events.MessageKindOK).
func validKind(k string) bool { return k != "" && events.MessageKindOK(k) }

func validPriority(p string) bool { return p != "" && events.PriorityOK(p) }

// Escalate is escalate (D§7.5): a follow-up message, to the sender's own
// task unless To says otherwise. Unlike pi-crew, To is validated: the run
// inbox ("parent") or a task of the run.
type Escalate struct {
	RunID string
	// FromTask is the sending worker's task id; empty for the orchestrator,
	// which then has no default recipient and must name one.
	FromTask string
	To       string
	Body     string
	Priority string // default normal
}

// Kind implements Command.
func (*Escalate) Kind() string { return "escalate" }

// EscalateResult is the answer to escalate.
type EscalateResult struct {
	MessageID string `json:"messageId"`
	To        string `json:"to"`
	Durable   bool   `json:"durable"`
}

// Mailbox is the mailbox escalate appends to: To's task (the sender's own
// when To is empty), or events.RunInbox for ToParent; false when it names
// none (the orchestrator must give To).
func (c *Escalate) Mailbox() (string, bool) {
	switch c.To {
	case "":
		return c.FromTask, c.FromTask != ""
	case ToParent:
		return events.RunInbox, true
	}
	return c.To, true
}

// toAndPriority are the message's recipient as To names it (the sender's
// own task where To is empty) and its priority, normal where it names none.
func (c *Escalate) toAndPriority() (to, priority string) {
	to, priority = c.To, c.Priority
	if to == "" {
		to = c.FromTask
	}
	if priority == "" {
		priority = events.PriorityNormal
	}
	return to, priority
}

// CheckParams refuses c for what its params decide alone, as decide does
// first, before it reads any state: a *RejectedError, or nil. The broker
// leaves a command that fails it to the engine, so that the answer to it
// is the engine's.
func (c *Escalate) CheckParams() error {
	to, priority := c.toAndPriority()
	switch {
	case c.Body == "":
		return badParams("escalate: body must be 1..%d chars", MaxBodyChars)
	case utf8.RuneCountInString(c.Body) > MaxBodyChars:
		return bodyTooLarge(c.Kind())
	case !validPriority(priority):
		return badParams("escalate: priority must be urgent, normal or low")
	case to == "":
		return badParams("escalate: to is required without a task-scoped credential")
	}
	return nil
}

func (c *Escalate) decide(s *projections.State, env *Env) (Decision, error) {
	if err := c.CheckParams(); err != nil {
		return Decision{}, err
	}
	to, priority := c.toAndPriority()
	if _, ok := s.Run(c.RunID); !ok {
		return Decision{}, reject(CodeNoManifest, "no-manifest", "run %q not found", c.RunID)
	}
	from := orchestratorSender
	if c.FromTask != "" {
		if _, ok := s.Task(c.RunID, c.FromTask); !ok {
			return Decision{}, reject(CodeNoTask, "no-task", "task %q not found in run %q", c.FromTask, c.RunID)
		}
		from = c.FromTask
	}
	box, _ := c.Mailbox()
	if box != events.RunInbox {
		if _, ok := s.Task(c.RunID, to); !ok {
			return Decision{}, badParams("escalate: recipient %q is not a task of run %q", to, c.RunID)
		}
	}
	id := "esc_" + strings.TrimPrefix(messageID(env), "msg_")
	ev := env.event(c.RunID, events.TypeMailboxAppended, &events.MailboxAppended{
		ID: id, To: box, From: from, Kind: events.KindFollowUp, Priority: priority,
		DeliveryMode: events.DeliveryNextTurn, Body: c.Body,
	})
	return Decision{Events: []events.Event{ev}, Result: EscalateResult{MessageID: id, To: to, Durable: true}}, nil
}

// MailboxDeliver marks messages of one mailbox delivered (pushed live or
// read). Messages already delivered or acknowledged are left alone, so a
// repeated report is a no-op.
type MailboxDeliver struct {
	RunID string
	// Recipient is the mailbox: a task id, or events.RunInbox.
	Recipient  string
	MessageIDs []string
}

// Kind implements Command.
func (*MailboxDeliver) Kind() string { return "mailbox.deliver" }

// MailboxAck acknowledges messages of one mailbox, from queued or
// delivered. Acknowledged messages are left alone (idempotent).
type MailboxAck struct {
	RunID      string
	Recipient  string
	MessageIDs []string
}

// Kind implements Command.
func (*MailboxAck) Kind() string { return "mailbox.ack" }

// MailboxResult is the answer to mailbox.deliver and mailbox.ack: Changed
// lists the ids whose status this command moved, in the order given.
type MailboxResult struct {
	OK      bool     `json:"ok"`
	Changed []string `json:"changed"`
}

func (c *MailboxDeliver) decide(s *projections.State, env *Env) (Decision, error) {
	return markMessages(s, env, c.Kind(), c.RunID, c.Recipient, c.MessageIDs, projections.MessageDelivered)
}

func (c *MailboxAck) decide(s *projections.State, env *Env) (Decision, error) {
	return markMessages(s, env, c.Kind(), c.RunID, c.Recipient, c.MessageIDs, projections.MessageAcknowledged)
}

// markMessages moves the named messages of recipient's mailbox forward to
// st. Every id must name a message of that mailbox; otherwise nothing is
// recorded, so a caller cannot touch another task's mailbox.
func markMessages(s *projections.State, env *Env, method, runID, rcpt string, ids []string,
	st projections.MessageStatus) (Decision, error) {
	if len(ids) == 0 || len(ids) > MaxMessageIDs {
		return Decision{}, badParams("%s: messageIds must list 1..%d ids", method, MaxMessageIDs)
	}
	if _, ok := s.Run(runID); !ok {
		return Decision{}, reject(CodeNoManifest, "no-manifest", "run %q not found", runID)
	}
	res := MailboxResult{OK: true, Changed: []string{}}
	var evs []events.Event
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		m, ok := s.Message(runID, id)
		if !ok || m.To != rcpt {
			return Decision{}, badParams("%s: message %q is not in mailbox %q of run %q", method, id,
				mailboxName(rcpt), runID)
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		switch {
		case st == projections.MessageDelivered && m.Status == projections.MessageQueued:
			evs = append(evs, env.event(runID, events.TypeMailboxDelivered,
				&events.MailboxDelivered{MessageID: id, Recipient: rcpt}))
		case st == projections.MessageAcknowledged && m.Status != projections.MessageAcknowledged:
			evs = append(evs, env.event(runID, events.TypeMailboxAcknowledged,
				&events.MailboxAcknowledged{MessageID: id, Recipient: rcpt}))
		default:
			continue
		}
		res.Changed = append(res.Changed, id)
	}
	return Decision{Events: evs, Result: res}, nil
}

// mailboxName is how messages name a mailbox: the task id, or "parent" for
// the run inbox.
func mailboxName(rcpt string) string {
	if rcpt == events.RunInbox {
		return ToParent
	}
	return rcpt
}
