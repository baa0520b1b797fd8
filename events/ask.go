package events

// Ask / wait event types (D§3.6, GS-17).
const (
	TypeAskRequested = "ask.requested"
	TypeAskAnswered  = "ask.answered"
	TypeAskTimedOut  = "ask.timedout"
)

// AskRequested opens a question and sets the run's waitState. pi-crew put the
// question in the envelope's message; crewlog keeps it in the payload.
// Deadline is server-clamped to ≤ askedAt + 3600 s.
type AskRequested struct {
	TaskID     string   `json:"taskId" msgpack:"taskId"`
	QuestionID string   `json:"questionId" msgpack:"questionId"`
	Question   string   `json:"question" msgpack:"question"`
	AskedAt    int64    `json:"askedAt" msgpack:"askedAt"`
	Deadline   int64    `json:"deadline" msgpack:"deadline"`
	TimeoutSec int64    `json:"timeoutSec" msgpack:"timeoutSec"`
	Clamped    bool     `json:"clamped" msgpack:"clamped"`
	Options    []string `json:"options,omitempty" msgpack:"options,omitempty"`
}

// AskAnswered resolves a question; the run's waitState is cleared only when
// it points at this task and question (R4).
type AskAnswered struct {
	TaskID     string `json:"taskId" msgpack:"taskId"`
	QuestionID string `json:"questionId" msgpack:"questionId"`
}

// Why a question closed before its deadline (AskTimedOut.Reason).
const (
	// AskReasonAskerEnded: its task left waiting on it other than by an answer — an end in any terminal status, a
	// retry, its delegation's settlement, its credential's revocation.
	AskReasonAskerEnded = "asker-ended"
	// AskReasonRunEnded: its run ended (completed, failed or cancelled) while its task was parked on it.
	AskReasonRunEnded = "run-ended"
)

// AskTimedOut closes a question whose deadline passed, or whose task left
// waiting other than by an answer (its end, a retry) or whose run ended, in
// that decision; waitState is cleared like for an answer. Reason says which
// (AskReason...) when it closed before its deadline; absent, the deadline
// had passed, as for every question of a log written before it was recorded.
type AskTimedOut struct {
	TaskID     string `json:"taskId" msgpack:"taskId"`
	QuestionID string `json:"questionId" msgpack:"questionId"`
	Reason     string `json:"reason,omitempty" msgpack:"reason,omitempty"`
}
