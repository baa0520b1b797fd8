package events

// TextBytes is what event ev adds to its run's bytes quota beside its
// messages: the bytes of every string its payload holds, ids included, but
// for mailbox.appended, whose body and subject the run counts as message
// bytes and whose other strings are the engine's. Every free text a client
// sends is in some payload's strings, so a run's events cannot grow its
// stream by more bytes than its quota allows, whatever bound each field has
// of its own (a status change's text may be 576 Ki chars) and however often
// a command may be repeated. An event of another stream (the engine's) adds
// nothing to any run.
func TextBytes(ev Event) int64 {
	if ev.Type == TypeMailboxAppended {
		return 0
	}
	n, _ := PayloadStringBytes(ev.Payload)
	return n
}
