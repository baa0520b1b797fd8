package broker

// A delegation carries its run's id (up to 255 chars) and its parent task's (up to 256) beside its counters and
// times, and its role: one of the three a delegation is admitted with, or an imported one of up to 64 chars of any
// char, which JSON writes in six bytes each for '<'. Settled, with its pid and usage, a delegation of such ids, that
// the run.create, task.create and delegate.request fit in a frame of 1 KiB (which a daemon allows), read back larger
// than that frame without its texts too, and query.delegations answered oversize-frame at it for good, no cursor
// passing it, so the orchestrator read no later delegation. A delegation that would not fit in a frame without its
// texts is sent without its role and runId too: empty (the runId is the run query.delegations names), namesOmitted
// true. Every other field is sent as it is, and a delegation that fits is sent as before.
//
// An imported delegation's subId is up to 256 chars of [A-Za-z0-9_-], and the id of its result's message up to 256
// bytes in JSON, where crewlog's own delegate.request mints a sub id of a few dozen: settled, one of such ids, whose
// every import.append fits in a frame of 1 KiB, read back larger than that frame without its texts, role and runId
// too. Its messageId is left out with its names, absent (the message, in its parent's mailbox or the run inbox, names
// the delegation in its data.subId).

// OmitNames leaves out w's role, runId and messageId and says so.
func (w *WireDelegation) OmitNames() { w.Role, w.RunID, w.MessageID, w.NamesOmitted = "", "", "", true }
