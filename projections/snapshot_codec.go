package projections

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/crewlog/crewlog/events"
	m "github.com/crewlog/crewlog/events/msgpackappend"
)

// The snapshot's bulk is the records of long runs: tasks, delegations, ledger
// accounts and messages. msgpack's reflection encoder spent most of a
// snapshot's encoding looking fields up and writing a few bytes at a time
// through an io.Writer; appendSnapshot writes the same bytes into one slice,
// field by field.
//
// NB: it writes exactly the bytes msgpack v5's reflection encoder writes for
// the snapshot struct with default options (fields in declaration order as a
// map keyed by the msgpack tag, int compact, int64 and uint64 fixed-width,
// float64 a double, a nil pointer or slice nil, omitempty only where tagged),
// so the format is unchanged and DecodeSnapshot still decodes by reflection.
// TestSnapshotEncoderMatchesReflection compares the two on whole states and on
// every record type filled at random: a field added to one of these structs
// fails it until it is written here too. Rare records (the config, a run's
// own record, asks, credentials, a task's waiting marker, a message's data)
// are still encoded by reflection, and so are a run's dispatcher jobs.

// appendSnapshot appends snap's encoding, as msgpack's Encoder.Encode(snap)
// would write it, handing the bytes to sp as they come (appendSnapshotRun)
// when sp is not nil. It stops at the first run after sp's writer failed.
func appendSnapshot(b []byte, snap *snapshot, sp *spiller) ([]byte, error) {
	b, err := appendSnapshotHead(b, snap)
	if err != nil {
		return nil, err
	}
	for i := 0; i < len(snap.Runs) && (sp == nil || sp.err == nil); i++ {
		if b, err = appendSnapshotRun(b, &snap.Runs[i], sp); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// appendSnapshotHead appends what precedes the runs: the map's header, the
// position, the config and the runs' array header.
func appendSnapshotHead(b []byte, snap *snapshot) ([]byte, error) {
	var err error
	b = m.MapLen(b, 6)
	b = m.Uint64(m.String(b, "position"), snap.Position)
	if b, err = appendReflected(m.String(b, "config"), &snap.Config); err != nil {
		return nil, err
	}
	if b, err = appendReflected(m.String(b, "runCount"), snap.RunCount); err != nil {
		return nil, err
	}
	if b, err = appendReflected(m.String(b, "ords"), snap.Ords); err != nil {
		return nil, err
	}
	if b, err = appendReflected(m.String(b, "missingViews"), snap.MissingViews); err != nil {
		return nil, err
	}
	return m.ArrayLen(m.String(b, "runs"), len(snap.Runs)), nil
}

// appendSnapshotRun appends one run's encoding. With a spiller, the buffer
// is handed to it whenever it holds a spill's worth and then reused, so
// encoding a run of megabytes never grows a buffer of megabytes (growing
// it, copy by copy, cost more than the encoding); the bytes come out in
// order, a spill's worth at a time, and what is left is returned. A
// spiller's error is its own to report (spiller.err).
func appendSnapshotRun(b []byte, sr *snapshotRun, sp *spiller) ([]byte, error) {
	var err error
	spill := sp.spill
	b = m.MapLen(b, 13)
	if b, err = appendReflected(m.String(b, "run"), sr.Run); err != nil {
		return nil, err
	}
	b = m.Uint64(m.String(b, "last"), sr.Last)
	b = m.Bool(m.String(b, "cold"), sr.Cold)
	b = appendLen(m.String(b, "tasks"), sr.Tasks == nil, len(sr.Tasks))
	for _, t := range sr.Tasks {
		if b, err = appendTask(b, t); err != nil {
			return nil, err
		}
		b = spill(b)
	}
	b = appendLen(m.String(b, "delegations"), sr.Delegations == nil, len(sr.Delegations))
	for _, d := range sr.Delegations {
		b = spill(appendDelegation(b, d))
	}
	b = appendLen(m.String(b, "accounts"), sr.Accounts == nil, len(sr.Accounts))
	for _, a := range sr.Accounts {
		b = spill(appendAccount(b, a))
	}
	b = appendLen(m.String(b, "messages"), sr.noMessages(), sr.messageCount())
	for i := range sr.messageCount() {
		if b, err = appendMessage(b, sr.message(i)); err != nil {
			return nil, err
		}
		b = spill(b)
	}
	if b, err = appendReflected(m.String(b, "asks"), sr.Asks); err != nil {
		return nil, err
	}
	if b, err = appendReflected(m.String(b, "credentials"), sr.Credentials); err != nil {
		return nil, err
	}
	b = m.Int64(m.String(b, "rootSpent"), sr.RootSpent)
	if b, err = appendReflected(m.String(b, "jobs"), sr.Jobs); err != nil {
		return nil, err
	}
	if b, err = appendOptional(m.String(b, "revokedRoots"), sr.RevokedRoots); err != nil {
		return nil, err
	}
	return m.Bool(m.String(b, "noView"), sr.NoView), nil
}

// appendLen writes a slice's array header, or nil for a nil slice.
func appendLen(b []byte, isNil bool, n int) []byte {
	if isNil {
		return m.Nil(b)
	}
	return m.ArrayLen(b, n)
}

// appendReflected appends v as msgpack's reflection encoder writes it.
func appendReflected(b []byte, v any) ([]byte, error) {
	enc, err := msgpack.Marshal(v)
	return append(b, enc...), err
}

// appendOptional appends nil for a nil p, else p by reflection.
func appendOptional[T any](b []byte, p *T) ([]byte, error) {
	if p == nil {
		return m.Nil(b), nil
	}
	return appendReflected(b, p)
}

func appendTask(b []byte, t *Task) ([]byte, error) {
	if t == nil {
		return m.Nil(b), nil
	}
	var err error
	n := 25
	if t.Allocation == nil { // the only omitempty field
		n--
	}
	b = m.MapLen(b, n)
	b = m.String(m.String(b, "runId"), t.RunID)
	b = m.String(m.String(b, "id"), t.TaskID)
	b = m.String(m.String(b, "kind"), t.Kind)
	b = m.String(m.String(b, "stepId"), t.StepID)
	b = m.String(m.String(b, "role"), t.Role)
	b = m.String(m.String(b, "agent"), t.Agent)
	b = m.String(m.String(b, "title"), t.Title)
	b = m.String(m.String(b, "status"), string(t.Status))
	b = m.String(m.String(b, "cwd"), t.Cwd)
	b = m.Strings(m.String(b, "dependsOn"), t.DependsOn)
	b = m.Int(m.String(b, "depth"), int64(t.Depth))
	b = m.String(m.String(b, "model"), t.Model)
	if t.Allocation != nil {
		b = m.MapLen(m.String(b, "allocation"), 2)
		b = m.Int64(m.String(b, "tokensGranted"), t.Allocation.TokensGranted)
		b = m.Int64(m.String(b, "tokensSpent"), t.Allocation.TokensSpent)
	}
	if b, err = appendOptional(m.String(b, "waiting"), t.Waiting); err != nil {
		return nil, err
	}
	u := &t.Usage
	b = m.MapLen(m.String(b, "usage"), 6)
	b = m.Int64(m.String(b, "input"), u.Input)
	b = m.Int64(m.String(b, "output"), u.Output)
	b = m.Int64(m.String(b, "cacheRead"), u.CacheRead)
	b = m.Int64(m.String(b, "cacheWrite"), u.CacheWrite)
	b = m.Float64(m.String(b, "cost"), u.Cost)
	b = m.Int64(m.String(b, "turns"), u.Turns)
	b = m.String(m.String(b, "error"), t.Error)
	b = m.String(m.String(b, "failureCause"), t.FailureCause)
	b = m.String(m.String(b, "statusReason"), t.StatusReason)
	b = m.Int(m.String(b, "retries"), int64(t.Retries))
	b = m.Int64(m.String(b, "createdAt"), t.CreatedAt)
	b = m.Int64(m.String(b, "startedAt"), t.StartedAt)
	b = m.Int64(m.String(b, "finishedAt"), t.FinishedAt)
	b = m.Int64(m.String(b, "actorEvents"), t.ActorEvents)
	b = m.Int64(m.String(b, "actorBytes"), t.ActorBytes)
	return m.Int64(m.String(b, "slotWaitAt"), t.SlotWaitAt), nil
}

func appendDelegation(b []byte, d *Delegation) []byte {
	if d == nil {
		return m.Nil(b)
	}
	b = m.MapLen(b, 24)
	b = m.String(m.String(b, "runId"), d.RunID)
	b = m.String(m.String(b, "subId"), d.SubID)
	b = m.String(m.String(b, "parentTaskId"), d.ParentTaskID)
	b = m.String(m.String(b, "role"), d.Role)
	b = m.Int(m.String(b, "depth"), int64(d.Depth))
	b = m.String(m.String(b, "model"), d.Model)
	b = m.Float64(m.String(b, "timeoutSec"), d.TimeoutSec)
	b = m.Int64(m.String(b, "deadline"), d.Deadline)
	b = m.String(m.String(b, "cwd"), d.Cwd)
	b = m.String(m.String(b, "title"), d.Title)
	b = m.Int(m.String(b, "parentAttempt"), int64(d.ParentAttempt))
	b = m.Bool(m.String(b, "metered"), d.Metered)
	b = m.Int64(m.String(b, "reservedTokens"), d.Reserved)
	b = m.String(m.String(b, "status"), string(d.Status))
	b = m.Bool(m.String(b, "cancelRequested"), d.CancelRequested)
	b = m.Int(m.String(b, "pid"), int64(d.PID))
	b = m.Int64(m.String(b, "admittedAt"), d.AdmittedAt)
	b = m.Int64(m.String(b, "settledAt"), d.SettledAt)
	b = m.Uint64(m.String(b, "admittedPosition"), d.AdmittedPosition)
	b = m.Bool(m.String(b, "ok"), d.OK)
	b = m.Int64(m.String(b, "usageTokens"), d.UsageTokens)
	b = m.Bool(m.String(b, "expired"), d.Expired)
	b = m.String(m.String(b, "messageId"), d.MessageID)
	return m.String(m.String(b, "shareHolder"), d.ShareHolder)
}

func appendAccount(b []byte, a *Account) []byte {
	if a == nil {
		return m.Nil(b)
	}
	b = m.MapLen(b, 8)
	b = m.String(m.String(b, "runId"), a.RunID)
	b = m.String(m.String(b, "taskId"), a.TaskID)
	b = m.Int64(m.String(b, "tokensGranted"), a.TokensGranted)
	b = m.Int64(m.String(b, "tokensSpent"), a.TokensSpent)
	b = m.Int64(m.String(b, "reserved"), a.Reserved)
	b = m.Int64(m.String(b, "charged"), a.Charged)
	b = appendLen(m.String(b, "reservations"), a.Reservations == nil, len(a.Reservations))
	for _, r := range a.Reservations {
		b = m.MapLen(b, 3)
		b = m.String(m.String(b, "subId"), r.SubID)
		b = m.Int64(m.String(b, "tokens"), r.Tokens)
		b = m.Int64(m.String(b, "at"), r.At)
	}
	b = appendLen(m.String(b, "charges"), a.Charges == nil, len(a.Charges))
	for _, c := range a.Charges {
		b = m.MapLen(b, 5)
		b = m.String(m.String(b, "subId"), c.SubID)
		b = m.Int64(m.String(b, "tokens"), c.Tokens)
		b = m.Int64(m.String(b, "usageTokens"), c.UsageTokens)
		b = m.Int64(m.String(b, "reservedTokens"), c.ReservedTokens)
		b = m.Int64(m.String(b, "at"), c.At)
	}
	return b
}

func appendMessage(b []byte, msg *Message) ([]byte, error) {
	b = m.MapLen(b, 17)
	b = m.String(m.String(b, "runId"), msg.RunID)
	b = m.String(m.String(b, "id"), msg.ID)
	b = m.String(m.String(b, "to"), msg.To)
	b = m.String(m.String(b, "from"), msg.From)
	b = m.String(m.String(b, "kind"), msg.Kind)
	b = m.String(m.String(b, "priority"), msg.Priority)
	b = m.String(m.String(b, "deliveryMode"), msg.DeliveryMode)
	b = m.String(m.String(b, "body"), msg.Body)
	b = m.String(m.String(b, "subject"), msg.Subject)
	b = m.String(m.String(b, "questionId"), msg.QuestionID)
	b = m.String(m.String(b, "replyTo"), msg.ReplyTo)
	b = m.Bool(m.String(b, "rerouted"), msg.Rerouted)
	b = m.String(b, "data")
	if msg.Data == nil {
		b = m.Nil(b)
	} else {
		b = events.AppendMessageData(b, msg.Data)
	}
	b = m.String(m.String(b, "status"), string(msg.Status))
	b = m.Int64(m.String(b, "createdAt"), msg.CreatedAt)
	b = m.Int64(m.String(b, "deliveredAt"), msg.DeliveredAt)
	return m.Int64(m.String(b, "acknowledgedAt"), msg.AcknowledgedAt), nil
}
