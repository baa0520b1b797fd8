package commands

import (
	"strconv"
	"unicode/utf8"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Settlement outcomes of delegate.settle (SPEC §4.3).
const (
	OutcomeOK        = "ok"
	OutcomeFailed    = "failed"
	OutcomeTimedOut  = "timed_out"
	OutcomeCancelled = "cancelled"
)

// MaxPID bounds the pid of delegate.spawned: 2^31-1, the largest a process id can be.
const MaxPID = 1<<31 - 1

// DelegateSpawned is the runtime's report that the grandchild process
// exists: queued → running. A late or repeated report is a no-op.
type DelegateSpawned struct {
	RunID string
	SubID string
	PID   int
}

// Kind implements Command.
func (*DelegateSpawned) Kind() string { return "delegate.spawned" }

func (c *DelegateSpawned) decide(s *projections.State, env *Env) (Decision, error) {
	d, err := delegation(s, c.RunID, c.SubID)
	if err != nil {
		return Decision{}, err
	}
	if c.PID <= 0 || c.PID > MaxPID {
		return Decision{}, badParams("delegate.spawned: pid must be an integer in 1..%d", MaxPID)
	}
	res := map[string]any{"ok": true, "subId": c.SubID, "status": string(d.Status)}
	if d.Status != projections.DelegationQueued {
		return Decision{Result: res}, nil // idempotent: nothing to change
	}
	res["status"] = string(projections.DelegationRunning)
	ev := env.event(c.RunID, events.TypeDelegateSpawned,
		&events.DelegateSpawned{TaskID: d.ParentTaskID, SubID: c.SubID, PID: c.PID})
	return Decision{Events: []events.Event{ev}, Result: res}, nil
}

// DelegateSettle records a grandchild's end (SPEC §4.3): in one batch, the
// fenced result delivered to the parent (or rerouted to the run inbox when
// the parent's attempt that made it has ended: parentEnded), any over-run charge, and the terminal event that
// frees the slot. The admin may leave RunID empty (see heldDelegation), to
// free any run's slot.
type DelegateSettle struct {
	RunID       string
	SubID       string
	Outcome     string
	Text        string
	UsageTokens *int64
	// SentText is the text as the client sent it, set by a caller that cut Text to what the readers of its frame
	// can take (the broker's fitResult), "" when Text is as sent. The request's fingerprint digests it in Text's
	// place (fingerprint_canonical.go), so that a retry through a frame that cuts otherwise (a crewd restarted with
	// another --max-frame, another node of a cluster) is the same request. NB: Text is a prefix of it, which a
	// forwarded settle leaves out of it (forwardedSettle): the text as sent is forwarded once, not once more beside
	// its cut.
	SentText string `msgpack:"-"`
}

// Kind implements Command.
func (*DelegateSettle) Kind() string { return "delegate.settle" }

// SettleResult is the answer to delegate.settle.
type SettleResult struct {
	OK        bool   `json:"ok"`
	SubID     string `json:"subId"`
	Status    string `json:"status"`
	MessageID string `json:"messageId"`
	To        string `json:"to"`
	Rerouted  bool   `json:"rerouted"`
	Charged   int64  `json:"chargedTokens"`
}

func (c *DelegateSettle) decide(s *projections.State, env *Env) (Decision, error) {
	d, err := heldDelegation(s, c.Kind(), c.RunID, c.SubID)
	if err != nil {
		return Decision{}, err
	}
	if d.Status.Terminal() {
		return Decision{}, badParams("delegate.settle: delegation %s is already settled (%s)", c.SubID, d.Status)
	}
	if c.UsageTokens != nil && (*c.UsageTokens < 0 || *c.UsageTokens > MaxUsageTokens) {
		return Decision{}, badParams("delegate.settle: usageTokens must be an integer in 0..%d",
			int64(MaxUsageTokens))
	}
	var usage int64
	if c.UsageTokens != nil {
		usage = *c.UsageTokens
	}
	switch c.Outcome {
	case OutcomeOK, OutcomeFailed, OutcomeTimedOut, OutcomeCancelled:
	default:
		return Decision{}, badParams("delegate.settle: outcome must be ok, failed, timed_out or cancelled")
	}
	evs, res := settlement(s, env, d, c.Outcome, c.resultBody(d.SubID), usage, false)
	return Decision{Events: evs, Result: res}, nil
}

// resultBody is the body of the message that delivers c's text of delegation subID: ResultBody, and when its caller
// cut the text to fit its readers' frame (SentText), a note of that cut after the fence, so that the parent reading
// it learns that there was more than it reads. NB: the text is cut further by the bytes the note takes in JSON, so
// that the message fits in the page it was cut for, as it did without the note: the cut is the caller's, as a build
// before the note made it too (cutFingerprint matches it), so the note's room is made here. A text cut shorter than
// the note (in a frame under about 1.6 KiB, to nothing) leaves it no room: it is delivered as cut, without the note,
// or the message would outgrow that page (a parent task of the longest id would read it without its body).
func (c *DelegateSettle) resultBody(subID string) string {
	if c.SentText == "" {
		return ResultBody(subID, c.Outcome, c.Text)
	}
	note := cutNote(c.SentText)
	room := jsonBytes(c.Text) - jsonBytes(note)
	if room < 0 {
		return ResultBody(subID, c.Outcome, c.Text)
	}
	return ResultBody(subID, c.Outcome, JSONPrefix(c.Text, room)) + note
}

// cutNote follows the fence of a result whose text was cut to fit a frame: the length of the text as sent.
func cutNote(sent string) string {
	return "\n[the result was cut to fit a frame: its text had " +
		strconv.Itoa(utf8.RuneCountInString(sent)) + " chars]"
}

// settlement builds the events that end delegation d: delivery, charge, the
// timeout of the question its shadow task is parked on and the terminal
// event, in that order (D8: the result is durable before the terminal event,
// in the same batch).
func settlement(s *projections.State, env *Env, d projections.Delegation, outcome, body string, usage int64,
	expired bool) ([]events.Event, *SettleResult) {
	ok := outcome == OutcomeOK
	typ := events.TypeDelegateCompleted
	switch outcome {
	case OutcomeFailed:
		typ = events.TypeDelegateFailed
	case OutcomeTimedOut:
		typ = events.TypeDelegateTimedOut
	case OutcomeCancelled:
		typ = events.TypeDelegateCancelled
	}
	to, rerouted := d.ParentTaskID, false
	if parentEnded(s, env, d) {
		to, rerouted = events.RunInbox, true
	}
	msgID := messageID(env)
	rec := new(settlementRecords)
	rec.delivered = events.MailboxAppended{
		ID: msgID, To: to, From: events.ResultSenderPrefix + d.SubID, Kind: events.KindResponse, Priority: events.PriorityNormal,
		DeliveryMode: events.DeliveryNextTurn, Body: body, Rerouted: rerouted,
		// NB: an allocation of its own: the mailbox keeps this pointer for
		// as long as the message, and would keep the whole block with it.
		Data: &events.MessageData{SubID: d.SubID, OK: ok, TimedOut: outcome == OutcomeTimedOut,
			Cancelled: outcome == OutcomeCancelled},
	}
	evs := append(rec.events[:0], env.event(d.RunID, events.TypeMailboxAppended, &rec.delivered))
	res := &rec.result
	*res = SettleResult{OK: true, SubID: d.SubID, Status: outcomeStatus(outcome), MessageID: msgID, To: to,
		Rerouted: rerouted}
	if d.Metered && usage > d.Reserved {
		charge := &rec.charged
		*charge = events.BudgetCharged{
			TaskID: d.ParentTaskID, SubID: d.SubID, Tokens: usage - d.Reserved, UsageTokens: usage,
			ReservedTokens: d.Reserved,
		}
		// Nested budget mode: a charge never takes the parent past what
		// it may still spend; the rest is recorded as uncharged.
		if run, found := s.Run(d.RunID); found && env.Config.BudgetMode == events.BudgetModeNested {
			if b := meter(s, run, d.ParentTaskID, env.Config); b.metered {
				charge.Tokens = max(0, min(charge.Tokens, b.remaining()))
				charge.Uncharged = usage - d.Reserved - charge.Tokens
			}
		}
		res.Charged = charge.Tokens
		if charge.Tokens > 0 || charge.Uncharged > 0 {
			evs = append(evs, env.event(d.RunID, events.TypeBudgetCharged, charge))
		}
	}
	// The shadow task ends with its delegation, and closes the question it is parked on (ask_end.go).
	// NB: the status first, as s.Task copies the task: a settlement is on every delegation's path.
	if st, _ := s.TaskStatus(d.RunID, d.SubID); st == projections.TaskWaiting {
		if shadow, found := s.Task(d.RunID, d.SubID); found {
			evs = append(evs, closeQuestion(s, env, d.RunID, shadow, events.AskReasonAskerEnded)...)
		}
	}
	term := &rec.settled
	*term = events.DelegateSettled{TaskID: d.ParentTaskID, SubID: d.SubID, OK: ok, UsageTokens: usage,
		MessageID: msgID, Expired: expired}
	var payload any
	switch typ {
	case events.TypeDelegateCompleted:
		payload = (*events.DelegateCompleted)(term)
	case events.TypeDelegateFailed:
		payload = (*events.DelegateFailed)(term)
	case events.TypeDelegateTimedOut:
		payload = (*events.DelegateTimedOut)(term)
	default:
		payload = (*events.DelegateCancelled)(term)
	}
	evs = append(evs, env.event(d.RunID, typ, payload))
	return evs, res
}

// ResultBody is the body of the message that delivers the result text of delegation subID settled with outcome:
// the text fenced under the outcome's tag, and cut to MaxResultChars (fence).
func ResultBody(subID, outcome, text string) string {
	tag := "ok"
	switch outcome {
	case OutcomeFailed:
		tag = "failed"
	case OutcomeTimedOut:
		tag = "timed out"
	case OutcomeCancelled:
		tag = "cancelled"
	}
	return fence(subID, tag, text)
}

// settlementRecords is what a settlement records, allocated at once (see
// delegateRecords), but for the message's data, which the mailbox keeps.
type settlementRecords struct {
	delivered events.MailboxAppended
	charged   events.BudgetCharged
	settled   events.DelegateSettled
	events    [4]events.Event // delivered, charged (if any), the shadow's question closed (if any), settled
	result    SettleResult
}

func outcomeStatus(outcome string) string {
	if outcome == OutcomeOK {
		return string(projections.DelegationCompleted)
	}
	return outcome
}

// DelegateCancel records the intent to cancel an in-flight delegation; the
// runtime kills the grandchild and settles it with outcome cancelled. The
// delegations the grandchild started, and theirs, are asked to cancel in the
// same batch (cancelBelow): a delegation asked to cancel may start no more,
// and those it started before would otherwise outlive it, holding slots and
// reservations nobody asked to cancel. A repeated cancel records only what
// is not yet asked. The admin may leave RunID empty (see heldDelegation).
type DelegateCancel struct {
	RunID  string
	SubID  string
	Reason string
}

// Kind implements Command.
func (*DelegateCancel) Kind() string { return "delegate.cancel" }

func (c *DelegateCancel) decide(s *projections.State, env *Env) (Decision, error) {
	if err := checkText(c.Kind(), textField{"reason", c.Reason, MaxStatusTextChars}); err != nil {
		return Decision{}, err
	}
	d, err := heldDelegation(s, c.Kind(), c.RunID, c.SubID)
	if err != nil {
		return Decision{}, err
	}
	if d.Status.Terminal() {
		return Decision{}, badParams("delegate.cancel: delegation %s is already settled (%s)", c.SubID, d.Status)
	}
	res := map[string]any{"ok": true, "subId": c.SubID, "cancelRequested": true}
	var evs []events.Event
	if !d.CancelRequested {
		evs = append(evs, env.event(d.RunID, events.TypeDelegateCancelRequested,
			&events.DelegateCancelRequested{TaskID: d.ParentTaskID, SubID: c.SubID, Reason: c.Reason}))
	}
	evs = append(evs, cancelBelow(s, env, d)...)
	return Decision{Events: evs, Result: res}, nil
}

// clippedTo implements statusTexter.
func (c *DelegateCancel) clippedTo(n int) Command {
	short := *c
	if !clipTexts(n, &short.Reason) {
		return nil
	}
	return &short
}

// cancelBelow records delegate.cancel_requested for every in-flight
// delegation below d — started by d's grandchild (whose shadow task is d's
// subId), or by one of theirs — not already asked to cancel, parents before
// children and, among siblings, in the order the clock expires them. Each
// reason names d, not the caller's reason, which may be long. Every
// in-flight delegation holds a slot, so the walk reads at most the slot
// pool.
func cancelBelow(s *projections.State, env *Env, d projections.Delegation) []events.Event {
	below := map[string][]projections.Delegation{} // a parent task: its in-flight delegations
	for _, x := range s.InFlight() {
		if x.RunID == d.RunID {
			below[x.ParentTaskID] = append(below[x.ParentTaskID], x)
		}
	}
	reason := "ancestor delegation " + d.SubID + " was asked to cancel"
	var evs []events.Event
	seen := map[string]bool{d.SubID: true}
	for queue := []string{d.SubID}; len(queue) > 0; queue = queue[1:] {
		for _, x := range below[queue[0]] {
			if seen[x.SubID] {
				continue // NB: no log the engine wrote has a cycle; a damaged one must not loop
			}
			seen[x.SubID] = true
			queue = append(queue, x.SubID)
			if !x.CancelRequested {
				evs = append(evs, env.event(d.RunID, events.TypeDelegateCancelRequested,
					&events.DelegateCancelRequested{TaskID: x.ParentTaskID, SubID: x.SubID, Reason: reason}))
			}
		}
	}
	return evs
}

// parentEnded reports whether the attempt of d's parent task that made d has
// ended: the task is gone or terminal, or (RerouteEndedAttempts) a retry
// has started another attempt since, whose connections are not the ones
// that asked for d (Credential.Attempt). Its result then goes to the run
// inbox, never to a later attempt as its own.
func parentEnded(s *projections.State, env *Env, d projections.Delegation) bool {
	status, retries, found := s.TaskAttempt(d.RunID, d.ParentTaskID)
	return !found || status.Terminal() || env.Config.RerouteEndedAttempts && retries != d.ParentAttempt
}

// DelegateExpire is submitted by the engine clock for a delegation not
// settled by admittedAt + timeoutSec + grace (SPEC §4.3): it times the
// delegation out, delivers a "(timed out)" result so the parent is never
// left waiting, and frees the slot. The reservation stays spent.
type DelegateExpire struct {
	RunID string
	SubID string
}

// Kind implements Command.
func (*DelegateExpire) Kind() string { return "delegate.expire" }

func (c *DelegateExpire) decide(s *projections.State, env *Env) (Decision, error) {
	d, err := delegation(s, c.RunID, c.SubID)
	if err != nil {
		return Decision{}, err
	}
	if d.Status.Terminal() {
		return Decision{}, badParams("delegate.expire: delegation %s is already settled (%s)", c.SubID, d.Status)
	}
	if at := ExpiresAt(d, env.Config); env.millis() < at {
		return Decision{}, badParams("delegate.expire: delegation %s expires at %d, not before", c.SubID, at)
	}
	evs, res := settlement(s, env, d, OutcomeTimedOut,
		ResultBody(d.SubID, OutcomeTimedOut, "[delegate timed out]"), 0, true)
	return Decision{Events: evs, Result: res}, nil
}

// ExpiresAt is when the engine times delegation d out, unix ms: its
// deadline (admission + timeoutSec) plus the configured settle grace.
func ExpiresAt(d projections.Delegation, cfg projections.Config) int64 {
	return d.Deadline + int64(cfg.SettleGraceSec)*1000
}

// heldDelegation is delegation for delegate.cancel and delegate.settle, whose
// admin caller may leave runID empty: the slot pool is daemon-wide, so the
// run is the one whose delegation holds slot subID.
func heldDelegation(s *projections.State, method, runID, subID string) (projections.Delegation, error) {
	if runID == "" {
		run, ok := s.SlotHolder(subID)
		if !ok {
			return projections.Delegation{}, reject(CodeNoTask, "no-delegation",
				"%s: no delegation %q holds a slot; name its runId", method, subID)
		}
		runID = run
	}
	return delegation(s, runID, subID)
}

// delegation finds a delegation or explains why not.
func delegation(s *projections.State, runID, subID string) (projections.Delegation, error) {
	if _, ok := s.Run(runID); !ok {
		return projections.Delegation{}, reject(CodeNoManifest, "no-manifest", "run %q not found", runID)
	}
	d, ok := s.Delegation(runID, subID)
	if !ok {
		return projections.Delegation{}, reject(CodeNoTask, "no-delegation", "delegation %q not found in run %q",
			subID, runID)
	}
	return d, nil
}

// messageID mints a mailbox message id in pi-crew's shape,
// msg_<base36 ms>_<12 chars>, from the env's clock and id source.
func messageID(env *Env) string {
	id := env.NewID()
	b := make([]byte, 0, len("msg_")+13+1+12)
	b = append(b, "msg_"...)
	b = strconv.AppendInt(b, env.millis(), 36)
	b = append(b, '_')
	n := 0
	for i := 0; i < len(id) && n < 12; i++ {
		// NB: bytes, not runes: a multi-byte rune has no byte in 0-9a-z.
		if c := id[i]; (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') {
			b = append(b, c)
			n++
		}
	}
	return string(b)
}
