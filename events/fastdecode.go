package events

// Hand-written decoders for the current schema version of every payload
// type. Replay decodes every payload of the log, and msgpack's reflection
// costs several times the rest of the fold; these decode the same bytes into
// the same structs without reflection. fastread.go holds the reader and the
// rules they share.
//
// A decoder is used only for the schema version it was written for: older
// versions are upcast and decoded by reflection, and an entry whose version
// is no longer the type's current one is dropped at start (see init), so a
// version bump without a new decoder degrades to reflection, never to a
// wrong struct. TestFastDecodeMatchesReflection pins every decoder to
// reflection's result, field by field.

// fastDecoder decodes one type's payload at one schema version.
type fastDecoder struct {
	version uint16
	decode  func(r *fastReader) any
}

var fastDecoders = map[string]fastDecoder{
	TypeRunCreated:       v1Fast((*fastReader).readRunCreated),
	TypeRunQueued:        v1Fast(func(r *fastReader, p *RunQueued) { r.readRunStatusChanged((*RunStatusChanged)(p)) }),
	TypeRunPlanning:      v1Fast(func(r *fastReader, p *RunPlanning) { r.readRunStatusChanged((*RunStatusChanged)(p)) }),
	TypeRunRunning:       v1Fast(func(r *fastReader, p *RunRunning) { r.readRunStatusChanged((*RunStatusChanged)(p)) }),
	TypeRunBlocked:       v1Fast(func(r *fastReader, p *RunBlocked) { r.readRunStatusChanged((*RunStatusChanged)(p)) }),
	TypeRunCompleted:     v1Fast(func(r *fastReader, p *RunCompleted) { r.readRunStatusChanged((*RunStatusChanged)(p)) }),
	TypeRunFailed:        v1Fast(func(r *fastReader, p *RunFailed) { r.readRunStatusChanged((*RunStatusChanged)(p)) }),
	TypeRunCancelled:     v1Fast(func(r *fastReader, p *RunCancelled) { r.readRunStatusChanged((*RunStatusChanged)(p)) }),
	TypeRunBudgetWarning: v1Fast(func(r *fastReader, p *RunBudgetWarning) { r.readRunBudget((*RunBudget)(p)) }),
	TypeRunBudgetAbort:   v1Fast(func(r *fastReader, p *RunBudgetAbort) { r.readRunBudget((*RunBudget)(p)) }),
	TypeRunQuotaExceeded: v1Fast((*fastReader).readRunQuotaExceeded),

	TypeTaskBudgetFairShare: v1Fast((*fastReader).readTaskBudgetFairShare),

	TypeTaskCreated:        v2Fast((*fastReader).readTaskCreated),
	TypeTaskStarted:        v1Fast((*fastReader).readTaskStarted),
	TypeTaskCompleted:      v1Fast(func(r *fastReader, p *TaskCompleted) { r.readTaskEnded((*TaskEnded)(p)) }),
	TypeTaskFailed:         v1Fast(func(r *fastReader, p *TaskFailed) { r.readTaskEnded((*TaskEnded)(p)) }),
	TypeTaskNeedsAttention: v1Fast(func(r *fastReader, p *TaskNeedsAttention) { r.readTaskEnded((*TaskEnded)(p)) }),
	TypeTaskCancelled:      v1Fast((*fastReader).readTaskCancelled),
	TypeTaskSkipped:        v1Fast((*fastReader).readTaskSkipped),
	TypeTaskRetried:        v1Fast((*fastReader).readTaskRetried),
	TypeTaskWaiting:        v1Fast((*fastReader).readTaskWaiting),
	TypeTaskResumed:        v1Fast((*fastReader).readTaskResumed),
	TypeTaskUsage:          v1Fast((*fastReader).readTaskUsage),

	TypeDelegateRequested:       v1Fast((*fastReader).readDelegateRequested),
	TypeDelegateAdmitted:        v1Fast((*fastReader).readDelegateAdmitted),
	TypeDelegateRejected:        v1Fast((*fastReader).readDelegateRejected),
	TypeDelegateSpawned:         v1Fast((*fastReader).readDelegateSpawned),
	TypeDelegateCompleted:       v1Fast(func(r *fastReader, p *DelegateCompleted) { r.readDelegateSettled((*DelegateSettled)(p)) }),
	TypeDelegateFailed:          v1Fast(func(r *fastReader, p *DelegateFailed) { r.readDelegateSettled((*DelegateSettled)(p)) }),
	TypeDelegateTimedOut:        v1Fast(func(r *fastReader, p *DelegateTimedOut) { r.readDelegateSettled((*DelegateSettled)(p)) }),
	TypeDelegateCancelled:       v1Fast(func(r *fastReader, p *DelegateCancelled) { r.readDelegateSettled((*DelegateSettled)(p)) }),
	TypeDelegateCancelRequested: v1Fast((*fastReader).readDelegateCancelRequested),

	TypeBudgetReserved: v1Fast((*fastReader).readBudgetReserved),
	TypeBudgetCharged:  v1Fast((*fastReader).readBudgetCharged),

	TypeMailboxAppended:     v1Fast((*fastReader).readMailboxAppended),
	TypeMailboxDelivered:    v1Fast((*fastReader).readMailboxDelivered),
	TypeMailboxAcknowledged: v1Fast((*fastReader).readMailboxAcknowledged),
	TypeSteerPushed:         v1Fast((*fastReader).readSteerPushed),

	TypeAskRequested: v1Fast((*fastReader).readAskRequested),
	TypeAskAnswered:  v1Fast((*fastReader).readAskAnswered),
	TypeAskTimedOut:  v1Fast((*fastReader).readAskTimedOut),

	TypeCredentialIssued:  v1Fast((*fastReader).readCredentialIssued),
	TypeCredentialRevoked: v1Fast((*fastReader).readCredentialRevoked),

	TypeEngineConfigured: v1Fast((*fastReader).readEngineConfigured),
}

// v1Fast is the decoder of a type at schema version 1.
func v1Fast[T any](read func(*fastReader, *T)) fastDecoder { return fastAt(1, read) }

// v2Fast is the decoder of a type at schema version 2.
func v2Fast[T any](read func(*fastReader, *T)) fastDecoder { return fastAt(2, read) }

func fastAt[T any](version uint16, read func(*fastReader, *T)) fastDecoder {
	return fastDecoder{version: version, decode: func(r *fastReader) any {
		p := new(T)
		read(r, p)
		return p
	}}
}

func init() {
	// NB: a decoder written for a version that is no longer current would
	// decode new bytes into the old shape; such an entry goes, and the type
	// decodes by reflection until its decoder is updated.
	for t, f := range fastDecoders {
		if k, ok := registry[t]; !ok || k.version != f.version {
			delete(fastDecoders, t)
		}
	}
}

// decodeFast decodes b, a payload of type t at schema version version, by
// hand when a decoder for that version exists. With fastFallback (or no
// decoder) the caller decodes by reflection.
func decodeFast(t string, version uint16, b []byte, strs *Decoder) (any, fastStatus) {
	f, ok := fastDecoders[t]
	if !ok || f.version != version {
		return nil, fastFallback
	}
	return f.run(b, strs)
}

// run decodes b; strs, when not nil, shares repeated strings.
func (f fastDecoder) run(b []byte, strs *Decoder) (any, fastStatus) {
	if len(b) == 0 || b[0] == 0xc0 {
		// A nil payload decodes to a zero struct by reflection; it never
		// occurs in a log, so it is not worth a path of its own.
		return nil, fastFallback
	}
	r := fastReader{b: b, shared: strs}
	p := f.decode(&r)
	switch {
	case r.st != fastOK:
		return nil, r.st
	case r.i != len(b):
		return nil, fastFallback // trailing bytes: reflection's error
	}
	return p, fastOK
}

// The nested structs are pointers: nil stays nil, anything else is a new
// struct, as reflection decodes them.

func (r *fastReader) policy() *Policy {
	if r.peekNil() {
		return nil
	}
	p := new(Policy)
	r.readPolicy(p)
	return p
}

func (r *fastReader) messageData() *MessageData {
	if r.peekNil() {
		return nil
	}
	p := new(MessageData)
	r.readMessageData(p)
	return p
}

// One reader per payload shape. Each takes the keys in any order, skips
// the ones it does not know and leaves absent ones zero.

func (r *fastReader) readRunCreated(p *RunCreated) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "team":
			r.once(&seen, 0)
			p.Team = r.str()
		case "workflow":
			r.once(&seen, 1)
			p.Workflow = r.str()
		case "goal":
			r.once(&seen, 2)
			p.Goal = r.str()
		case "cwd":
			r.once(&seen, 3)
			p.Cwd = r.str()
		case "budgetTotal":
			r.once(&seen, 4)
			if !r.peekNil() {
				v := r.int()
				p.BudgetTotal = &v
			}
		case "budgetUnlimited":
			r.once(&seen, 5)
			p.BudgetUnlimited = r.bool()
		case "budgetWarning":
			r.once(&seen, 6)
			if !r.peekNil() {
				v := r.float()
				p.BudgetWarning = &v
			}
		case "budgetAbort":
			r.once(&seen, 7)
			if !r.peekNil() {
				v := r.float()
				p.BudgetAbort = &v
			}
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readTaskBudgetFairShare(p *TaskBudgetFairShare) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "budgetTotal":
			r.once(&seen, 1)
			p.BudgetTotal = r.int()
		case "taskUsage":
			r.once(&seen, 2)
			p.TaskUsage = r.int()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readRunStatusChanged(p *RunStatusChanged) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "summary":
			r.once(&seen, 0)
			p.Summary = r.str()
		case "reason":
			r.once(&seen, 1)
			p.Reason = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readRunBudget(p *RunBudget) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "budgetTotal":
			r.once(&seen, 0)
			p.BudgetTotal = r.int()
		case "budgetUsed":
			r.once(&seen, 1)
			p.BudgetUsed = r.int()
		case "threshold":
			r.once(&seen, 2)
			p.Threshold = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readTaskCreated(p *TaskCreated) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "role":
			r.once(&seen, 1)
			p.Role = r.str()
		case "agent":
			r.once(&seen, 2)
			p.Agent = r.str()
		case "title":
			r.once(&seen, 3)
			p.Title = r.str()
		case "cwd":
			r.once(&seen, 4)
			p.Cwd = r.str()
		case "dependsOn":
			r.once(&seen, 5)
			p.DependsOn = r.strs()
		case "stepId":
			r.once(&seen, 6)
			p.StepID = r.str()
		case "depth":
			r.once(&seen, 7)
			p.Depth = int(r.int())
		case "model":
			r.once(&seen, 8)
			p.Model = r.str()
		case "kind":
			r.once(&seen, 9)
			p.Kind = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readTaskStarted(p *TaskStarted) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "role":
			r.once(&seen, 1)
			p.Role = r.str()
		case "agent":
			r.once(&seen, 2)
			p.Agent = r.str()
		case "runtime":
			r.once(&seen, 3)
			p.Runtime = r.str()
		case "cwd":
			r.once(&seen, 4)
			p.Cwd = r.str()
		case "worktreePath":
			r.once(&seen, 5)
			p.WorktreePath = r.str()
		case "worktreeBranch":
			r.once(&seen, 6)
			p.WorktreeBranch = r.str()
		case "worktreeReused":
			r.once(&seen, 7)
			p.WorktreeReused = r.bool()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readTaskEnded(p *TaskEnded) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "error":
			r.once(&seen, 1)
			p.Error = r.str()
		case "failureCause":
			r.once(&seen, 2)
			p.FailureCause = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readTaskCancelled(p *TaskCancelled) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "reason":
			r.once(&seen, 1)
			p.Reason = r.str()
		case "phase":
			r.once(&seen, 2)
			p.Phase = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readTaskSkipped(p *TaskSkipped) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "reason":
			r.once(&seen, 1)
			p.Reason = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readTaskRetried(p *TaskRetried) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "reason":
			r.once(&seen, 1)
			p.Reason = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readTaskWaiting(p *TaskWaiting) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "questionId":
			r.once(&seen, 1)
			p.QuestionID = r.str()
		case "askedAt":
			r.once(&seen, 2)
			p.AskedAt = r.int()
		case "deadline":
			r.once(&seen, 3)
			p.Deadline = r.int()
		case "options":
			r.once(&seen, 4)
			p.Options = r.strs()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readTaskResumed(p *TaskResumed) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "questionId":
			r.once(&seen, 1)
			p.QuestionID = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readTaskUsage(p *TaskUsage) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "input":
			r.once(&seen, 1)
			p.Input = r.int()
		case "output":
			r.once(&seen, 2)
			p.Output = r.int()
		case "cacheRead":
			r.once(&seen, 3)
			p.CacheRead = r.int()
		case "cacheWrite":
			r.once(&seen, 4)
			p.CacheWrite = r.int()
		case "cost":
			r.once(&seen, 5)
			p.Cost = r.float()
		case "turns":
			r.once(&seen, 6)
			p.Turns = r.int()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readDelegateRequested(p *DelegateRequested) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "subId":
			r.once(&seen, 1)
			p.SubID = r.str()
		case "role":
			r.once(&seen, 2)
			p.Role = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readDelegateAdmitted(p *DelegateAdmitted) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "subId":
			r.once(&seen, 1)
			p.SubID = r.str()
		case "childDepth":
			r.once(&seen, 2)
			p.ChildDepth = int(r.int())
		case "role":
			r.once(&seen, 3)
			p.Role = r.str()
		case "unmetered":
			r.once(&seen, 4)
			p.Unmetered = r.bool()
		case "reservedTokens":
			r.once(&seen, 5)
			p.ReservedTokens = r.int()
		case "model":
			r.once(&seen, 6)
			p.Model = r.str()
		case "timeoutSec":
			r.once(&seen, 7)
			p.TimeoutSec = r.float()
		case "deadline":
			r.once(&seen, 8)
			p.Deadline = r.int()
		case "cwd":
			r.once(&seen, 9)
			p.Cwd = r.str()
		case "title":
			r.once(&seen, 10)
			p.Title = r.str()
		case "description":
			r.once(&seen, 11)
			p.Description = r.str()
		case "prompt":
			r.once(&seen, 12)
			p.Prompt = r.str()
		case "maxTurns":
			r.once(&seen, 13)
			p.MaxTurns = int(r.int())
		case "parentRole":
			r.once(&seen, 14)
			p.ParentRole = r.str()
		case "policy":
			r.once(&seen, 15)
			p.Policy = r.policy()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readDelegateRejected(p *DelegateRejected) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "subId":
			r.once(&seen, 1)
			p.SubID = r.str()
		case "reason":
			r.once(&seen, 2)
			p.Reason = r.str()
		case "message":
			r.once(&seen, 3)
			p.Message = r.str()
		case "policy":
			r.once(&seen, 4)
			p.Policy = r.policy()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readPolicy(p *Policy) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "nestingEnabled":
			r.once(&seen, 0)
			p.NestingEnabled = r.bool()
		case "trusted":
			r.once(&seen, 1)
			p.Trusted = r.bool()
		case "parentStatus":
			r.once(&seen, 2)
			p.ParentStatus = r.str()
		case "parentRole":
			r.once(&seen, 3)
			p.ParentRole = r.str()
		case "role":
			r.once(&seen, 4)
			p.Role = r.str()
		case "depth":
			r.once(&seen, 5)
			p.Depth = int(r.int())
		case "childDepth":
			r.once(&seen, 6)
			p.ChildDepth = int(r.int())
		case "maxDepth":
			r.once(&seen, 7)
			p.MaxDepth = int(r.int())
		case "held":
			r.once(&seen, 8)
			p.Held = int(r.int())
		case "capacity":
			r.once(&seen, 9)
			p.Capacity = int(r.int())
		case "metered":
			r.once(&seen, 10)
			p.Metered = r.bool()
		case "granted":
			r.once(&seen, 11)
			p.Granted = r.int()
		case "spent":
			r.once(&seen, 12)
			p.Spent = r.int()
		case "requested":
			r.once(&seen, 13)
			p.Requested = r.int()
		case "unmeteredDelegates":
			r.once(&seen, 14)
			p.UnmeteredDelegates = r.str()
		case "model":
			r.once(&seen, 15)
			p.Model = r.str()
		case "catalogSize":
			r.once(&seen, 16)
			p.CatalogSize = int(r.int())
		case "timeoutSec":
			r.once(&seen, 17)
			p.TimeoutSec = r.float()
		case "serializeOnPathOverlap":
			r.once(&seen, 18)
			p.Serialize = r.bool()
		case "overlapping":
			r.once(&seen, 19)
			p.Overlapping = int(r.int())
		case "waiting":
			r.once(&seen, 20)
			p.Waiting = int(r.int())
		case "runHeld":
			r.once(&seen, 21)
			p.RunHeld = int(r.int())
		case "slotShare":
			r.once(&seen, 22)
			p.SlotShare = int(r.int())
		case "budgetMode":
			r.once(&seen, 23)
			p.BudgetMode = r.str()
		case "runPool":
			r.once(&seen, 24)
			p.RunPool = r.int()
		case "runSpent":
			r.once(&seen, 25)
			p.RunSpent = r.int()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readDelegateSpawned(p *DelegateSpawned) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "subId":
			r.once(&seen, 1)
			p.SubID = r.str()
		case "pid":
			r.once(&seen, 2)
			p.PID = int(r.int())
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readDelegateSettled(p *DelegateSettled) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "subId":
			r.once(&seen, 1)
			p.SubID = r.str()
		case "ok":
			r.once(&seen, 2)
			p.OK = r.bool()
		case "usageTokens":
			r.once(&seen, 3)
			p.UsageTokens = r.int()
		case "messageId":
			r.once(&seen, 4)
			p.MessageID = r.str()
		case "expired":
			r.once(&seen, 5)
			p.Expired = r.bool()
		case "error":
			r.once(&seen, 6)
			p.Error = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readDelegateCancelRequested(p *DelegateCancelRequested) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "subId":
			r.once(&seen, 1)
			p.SubID = r.str()
		case "reason":
			r.once(&seen, 2)
			p.Reason = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readBudgetReserved(p *BudgetReserved) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "subId":
			r.once(&seen, 1)
			p.SubID = r.str()
		case "tokens":
			r.once(&seen, 2)
			p.Tokens = r.int()
		case "grantedTokens":
			r.once(&seen, 3)
			p.GrantedTokens = r.int()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readBudgetCharged(p *BudgetCharged) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "subId":
			r.once(&seen, 1)
			p.SubID = r.str()
		case "tokens":
			r.once(&seen, 2)
			p.Tokens = r.int()
		case "usageTokens":
			r.once(&seen, 3)
			p.UsageTokens = r.int()
		case "reservedTokens":
			r.once(&seen, 4)
			p.ReservedTokens = r.int()
		case "uncharged":
			r.once(&seen, 5)
			p.Uncharged = r.int()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readMailboxAppended(p *MailboxAppended) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "id":
			r.once(&seen, 0)
			p.ID = r.str()
		case "to":
			r.once(&seen, 1)
			p.To = r.str()
		case "from":
			r.once(&seen, 2)
			p.From = r.str()
		case "kind":
			r.once(&seen, 3)
			p.Kind = r.str()
		case "priority":
			r.once(&seen, 4)
			p.Priority = r.str()
		case "deliveryMode":
			r.once(&seen, 5)
			p.DeliveryMode = r.str()
		case "body":
			r.once(&seen, 6)
			p.Body = r.str()
		case "subject":
			r.once(&seen, 7)
			p.Subject = r.str()
		case "questionId":
			r.once(&seen, 8)
			p.QuestionID = r.str()
		case "replyTo":
			r.once(&seen, 9)
			p.ReplyTo = r.str()
		case "rerouted":
			r.once(&seen, 10)
			p.Rerouted = r.bool()
		case "data":
			r.once(&seen, 11)
			p.Data = r.messageData()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readMessageData(p *MessageData) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "subId":
			r.once(&seen, 0)
			p.SubID = r.str()
		case "ok":
			r.once(&seen, 1)
			p.OK = r.bool()
		case "timedOut":
			r.once(&seen, 2)
			p.TimedOut = r.bool()
		case "cancelled":
			r.once(&seen, 3)
			p.Cancelled = r.bool()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readMailboxDelivered(p *MailboxDelivered) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "messageId":
			r.once(&seen, 0)
			p.MessageID = r.str()
		case "recipient":
			r.once(&seen, 1)
			p.Recipient = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readMailboxAcknowledged(p *MailboxAcknowledged) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "messageId":
			r.once(&seen, 0)
			p.MessageID = r.str()
		case "recipient":
			r.once(&seen, 1)
			p.Recipient = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readSteerPushed(p *SteerPushed) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "messageId":
			r.once(&seen, 1)
			p.MessageID = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readAskRequested(p *AskRequested) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "questionId":
			r.once(&seen, 1)
			p.QuestionID = r.str()
		case "question":
			r.once(&seen, 2)
			p.Question = r.str()
		case "askedAt":
			r.once(&seen, 3)
			p.AskedAt = r.int()
		case "deadline":
			r.once(&seen, 4)
			p.Deadline = r.int()
		case "timeoutSec":
			r.once(&seen, 5)
			p.TimeoutSec = r.int()
		case "clamped":
			r.once(&seen, 6)
			p.Clamped = r.bool()
		case "options":
			r.once(&seen, 7)
			p.Options = r.strs()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readAskAnswered(p *AskAnswered) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "questionId":
			r.once(&seen, 1)
			p.QuestionID = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readAskTimedOut(p *AskTimedOut) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "questionId":
			r.once(&seen, 1)
			p.QuestionID = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readCredentialIssued(p *CredentialIssued) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "role":
			r.once(&seen, 1)
			p.Role = r.str()
		case "digest":
			r.once(&seen, 2)
			p.Digest = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readCredentialRevoked(p *CredentialRevoked) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "taskId":
			r.once(&seen, 0)
			p.TaskID = r.str()
		case "digest":
			r.once(&seen, 1)
			p.Digest = r.str()
		case "reason":
			r.once(&seen, 2)
			p.Reason = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readEngineConfigured(p *EngineConfigured) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "nestingEnabled":
			r.once(&seen, 0)
			p.NestingEnabled = r.bool()
		case "maxDepth":
			r.once(&seen, 1)
			p.MaxDepth = int(r.int())
		case "maxSlots":
			r.once(&seen, 2)
			p.MaxSlots = int(r.int())
		case "serializeOnPathOverlap":
			r.once(&seen, 3)
			p.SerializeOnPathOverlap = r.bool()
		case "unmeteredDelegates":
			r.once(&seen, 4)
			p.UnmeteredDelegates = r.str()
		case "modelCatalog":
			r.once(&seen, 5)
			p.ModelCatalog = r.strs()
		case "settleGraceSec":
			r.once(&seen, 6)
			p.SettleGraceSec = int(r.int())
		case "slotShare":
			r.once(&seen, 7)
			p.SlotShare = int(r.int())
		case "slotWaitSec":
			r.once(&seen, 8)
			p.SlotWaitSec = int(r.int())
		case "quotaEvents":
			r.once(&seen, 9)
			p.QuotaEvents = r.int()
		case "quotaBytes":
			r.once(&seen, 10)
			p.QuotaBytes = r.int()
		case "quotaMsgsPerMin":
			r.once(&seen, 11)
			p.QuotaMsgsPerMin = int(r.int())
		case "budgetMode":
			r.once(&seen, 12)
			p.BudgetMode = r.str()
		default:
			r.skip()
		}
	}
}

func (r *fastReader) readRunQuotaExceeded(p *RunQuotaExceeded) {
	var seen fieldSet
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch r.key() {
		case "method":
			r.once(&seen, 0)
			p.Method = r.str()
		case "taskId":
			r.once(&seen, 1)
			p.TaskID = r.str()
		case "quota":
			r.once(&seen, 2)
			p.Quota = r.str()
		case "used":
			r.once(&seen, 3)
			p.Used = r.int()
		case "adding":
			r.once(&seen, 4)
			p.Adding = r.int()
		case "max":
			r.once(&seen, 5)
			p.Max = r.int()
		default:
			r.skip()
		}
	}
}
