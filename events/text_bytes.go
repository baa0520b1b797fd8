package events

// TextBytes is what event ev adds to its run's bytes quota beside its
// messages: the bytes of every string it records — its payload's, ids
// included, and its envelope's (command id, causation and correlation ids,
// the actor's task) — but a mailbox.appended's body and subject, which the
// run counts as message bytes. Every free text and id a client sends is in
// some event's strings, so a run's events cannot grow its stream by more
// bytes than its quota allows, whatever bound each field has of its own (a
// status change's text may be 576 Ki chars; a message's replyTo is copied
// to every recipient) and however often a command may be repeated. An
// event of another stream (the engine's) adds nothing to any run.
func TextBytes(ev Event) int64 {
	n, _ := PayloadStringBytes(ev.Payload)
	if ev.Type == TypeMailboxAppended {
		if p := PayloadAs[MailboxAppended](ev); p != nil {
			n -= int64(len(p.Body) + len(p.Subject))
		}
	}
	return n + int64(len(ev.CommandID)+len(ev.CausationID)+len(ev.CorrelationID)+len(ev.Actor.TaskID))
}
