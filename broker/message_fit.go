package broker

// A message carries its run's id (up to 255 chars) and its recipient's (up to 256) three times — its id's label, its
// to and its taskId — beside its sender, kind, status and times, and the ids of what it answers: a replyTo of up to
// 256 chars of any char and a questionId of up to 128, which the orchestrator's msg.send takes ('<' sent in one byte,
// read back in six). The orchestrator's message of such ids, that the run.create, task.create and msg.send fit in a
// frame of 1 KiB (which a daemon allows), read back larger than that frame without its body and subject too, and
// msg.inbox and query.mailbox answered oversize-frame at it for good: its recipient read neither it nor any message
// after it, nor learnt its id to acknowledge it. A message that would not fit in a frame without its texts is sent
// without its runId, to, taskId, replyTo and questionId too: runId and to empty (the run and the mailbox the read
// names: the reader's own, or the taskId query.mailbox is given), the others absent, namesOmitted true. Its id, which
// names the mailbox in its label, is sent as it is, with every other field; a message that fits is sent as before.

// An imported message's id and data.subId are up to 256 bytes in JSON and its sender up to 256 chars of any char,
// where crewlog's own delegate.settle sends a result from a sub id of a few dozen: a delegation's result of such
// ids, or a sender of 256 '<' (a line a worker wrote), read back larger than a frame of 1 KiB without its texts and
// its other names too. A message that would not fit without them either is sent without its from and data.subId
// too: empty (a message always has a sender), namesOmitted true, its id, kind and the rest of its data as they are.

// omitNames leaves out w's runId, to, taskId, replyTo and questionId and says so.
func (w *wireMessage) omitNames() {
	w.RunID, w.To, w.TaskID, w.ReplyTo, w.QuestionID, w.NamesOmitted = "", "", "", "", "", true
}

// omitSender leaves out w's from and data.subId and says so.
func (w *wireMessage) omitSender() {
	w.From, w.NamesOmitted = "", true
	if w.Data != nil {
		data := *w.Data // NB: a copy: the message's own is the state's
		data.SubID = ""
		w.Data = &data
	}
}
