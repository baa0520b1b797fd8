package events

// Mailbox event types (D§2.6, D§2.7).
const (
	TypeMailboxAppended     = "mailbox.appended"
	TypeMailboxDelivered    = "mailbox.delivered"
	TypeMailboxAcknowledged = "mailbox.acknowledged"
	TypeSteerPushed         = "steer.pushed"
)

// RunInbox is the recipient of the run-level inbox (consumed by the
// orchestrator), as opposed to a task id.
const RunInbox = ""

// Message kinds (D§2.6).
const (
	KindMessage   = "message"
	KindNotify    = "notify"
	KindSteer     = "steer"
	KindFollowUp  = "follow-up"
	KindResponse  = "response"
	KindGroupJoin = "group_join"
)

// ResultSenderPrefix begins the sender (From) of the message that delivers a delegation's result: "delegate:" and
// its subId, as pi-crew writes it (D§6). The engine writes it, projections and audit tell a result by it.
const ResultSenderPrefix = "delegate:"

// Message priorities and delivery modes (D§2.6).
const (
	PriorityUrgent = "urgent"
	PriorityNormal = "normal"
	PriorityLow    = "low"

	DeliveryInterrupt = "interrupt"
	DeliveryNextTurn  = "next_turn"
)

// MessageKindOK, PriorityOK and DeliveryModeOK report whether a message's kind, priority or delivery mode is empty
// (an importer's default) or one of the words of D§2.6 above: what pi-crew writes and crewlog's commands record. NB:
// nothing else bounds an imported message's words, which every read of the message copies: one of 60,000 '<' left
// each read that met it larger than any frame.
func MessageKindOK(k string) bool {
	switch k {
	case "", KindMessage, KindNotify, KindSteer, KindFollowUp, KindResponse, KindGroupJoin:
		return true
	}
	return false
}

// PriorityOK: see MessageKindOK.
func PriorityOK(p string) bool {
	return p == "" || p == PriorityUrgent || p == PriorityNormal || p == PriorityLow
}

// DeliveryModeOK: see MessageKindOK.
func DeliveryModeOK(d string) bool { return d == "" || d == DeliveryInterrupt || d == DeliveryNextTurn }

// MessageWord is one of a message's words, by its JSON name, and what it may be.
type MessageWord struct {
	Name  string
	Value *string
	OK    func(string) bool
}

// MessageWords are a message's kind, priority and delivery mode, given by their places, each with its check
// (MessageKindOK, PriorityOK, DeliveryModeOK): what import.append refuses and the importer takes as absent.
func MessageWords(kind, priority, deliveryMode *string) [3]MessageWord {
	return [3]MessageWord{{"kind", kind, MessageKindOK}, {"priority", priority, PriorityOK},
		{"deliveryMode", deliveryMode, DeliveryModeOK}}
}

// MailboxAppended carries the whole message; it starts queued. The message
// id is unique within the run. A delegate result is a kind "response" from
// "delegate:<subId>" to the parent task, or to RunInbox with Rerouted set
// when the parent was already terminal.
type MailboxAppended struct {
	ID           string `json:"id" msgpack:"id"`
	To           string `json:"to" msgpack:"to"`
	From         string `json:"from" msgpack:"from"`
	Kind         string `json:"kind" msgpack:"kind"`
	Priority     string `json:"priority" msgpack:"priority"`
	DeliveryMode string `json:"deliveryMode" msgpack:"deliveryMode"`
	Body         string `json:"body" msgpack:"body"`
	Subject      string `json:"subject,omitempty" msgpack:"subject,omitempty"`
	QuestionID   string `json:"questionId,omitempty" msgpack:"questionId,omitempty"`
	ReplyTo      string `json:"replyTo,omitempty" msgpack:"replyTo,omitempty"`
	Rerouted     bool   `json:"rerouted,omitempty" msgpack:"rerouted,omitempty"`
	// Data is typed (not pi-crew's free-form object) so payloads hold no Go
	// maps and encode deterministically.
	Data *MessageData `json:"data,omitempty" msgpack:"data,omitempty"`
}

// MessageData is the structured part of a delegate result message
// (pi-crew data {subId, ok, timedOut}).
type MessageData struct {
	SubID     string `json:"subId,omitempty" msgpack:"subId,omitempty"`
	OK        bool   `json:"ok" msgpack:"ok"`
	TimedOut  bool   `json:"timedOut" msgpack:"timedOut"`
	Cancelled bool   `json:"cancelled,omitempty" msgpack:"cancelled,omitempty"`
}

// MailboxDelivered marks a message delivered (pushed live or read).
type MailboxDelivered struct {
	MessageID string `json:"messageId" msgpack:"messageId"`
	Recipient string `json:"recipient" msgpack:"recipient"`
}

// MailboxAcknowledged marks a message acknowledged; it is the single source
// of a message's status (pi-crew split it between two files, P18).
type MailboxAcknowledged struct {
	MessageID string `json:"messageId" msgpack:"messageId"`
	Recipient string `json:"recipient" msgpack:"recipient"`
}

// SteerPushed is the durable steering entry of D§2.7. It follows, in the
// same batch, the mailbox.appended of kind "steer" (priority default urgent,
// deliveryMode interrupt) whose id it names; the body lives only there.
type SteerPushed struct {
	TaskID    string `json:"taskId" msgpack:"taskId"`
	MessageID string `json:"messageId" msgpack:"messageId"`
}
