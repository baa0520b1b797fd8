package commands

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Steer sanitiser bounds (D§2.7).
const (
	MaxSteerChars    = events.MaxSteerChars
	MaxSteerNewlines = 50
)

// SteerPush is the orchestrator's steer.push (D§2.7): pi-crew's dual write
// (mailbox message + steering file line) becomes one batch, the mailbox
// message of kind steer followed by the steer.pushed entry naming it, so the
// two can never disagree.
type SteerPush struct {
	RunID    string
	TaskID   string
	Body     string
	Priority string // default urgent
}

// Kind implements Command.
func (*SteerPush) Kind() string { return "steer.push" }

// SteerResult is the answer to steer.push.
type SteerResult struct {
	MessageID string `json:"messageId"`
	TaskID    string `json:"taskId"`
	Durable   bool   `json:"durable"`
}

func (c *SteerPush) decide(s *projections.State, env *Env) (Decision, error) {
	priority := c.Priority
	if priority == "" {
		priority = events.PriorityUrgent
	}
	if err := sanitizeSteer(c.Body); err != nil {
		return Decision{}, err
	}
	if !validPriority(priority) {
		return Decision{}, badParams("steer.push: priority must be urgent, normal or low")
	}
	if _, ok := s.Run(c.RunID); !ok {
		return Decision{}, reject(CodeNoManifest, "no-manifest", "run %q not found", c.RunID)
	}
	if _, ok := s.Task(c.RunID, c.TaskID); !ok {
		return Decision{}, reject(CodeNoTask, "no-task", "task %q not found in run %q", c.TaskID, c.RunID)
	}
	id := "steer_" + strings.TrimPrefix(messageID(env), "msg_")
	evs := []events.Event{
		env.event(c.RunID, events.TypeMailboxAppended, &events.MailboxAppended{
			ID: id, To: c.TaskID, From: orchestratorSender, Kind: events.KindSteer, Priority: priority,
			DeliveryMode: events.DeliveryInterrupt, Body: c.Body,
		}),
		env.event(c.RunID, events.TypeSteerPushed, &events.SteerPushed{TaskID: c.TaskID, MessageID: id}),
	}
	return Decision{Events: evs, Result: SteerResult{MessageID: id, TaskID: c.TaskID, Durable: true}}, nil
}

// sanitizeSteer is pi-crew's steer sanitiser (D§2.7): a steer interrupts a
// worker mid-turn, so it is kept short, and free of control characters that
// could corrupt the worker's terminal or the line-based steering channel.
// Before it, as pi-crew's broker does, a body past every message's bound is
// oversize-frame (D§7.5), as msg.send and escalate answer.
func sanitizeSteer(body string) error {
	switch {
	case longerThan(body, MaxBodyChars):
		return bodyTooLarge("steer.push")
	case strings.TrimSpace(body) == "":
		return badParams("steer.push: body must not be empty")
	case !utf8.ValidString(body):
		return badParams("steer.push: body must be valid UTF-8")
	case utf8.RuneCountInString(body) > MaxSteerChars:
		return badParams("steer.push: body must be at most %d chars", MaxSteerChars)
	case strings.Count(body, "\n") > MaxSteerNewlines:
		return badParams("steer.push: body must have at most %d newlines", MaxSteerNewlines)
	}
	for _, r := range body {
		if unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' {
			return badParams("steer.push: body must not contain control characters other than TAB, LF and CR")
		}
	}
	return nil
}
