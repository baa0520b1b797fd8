package eventlog

// Failed returns a channel closed when the log fails stop, after a write or sync error of any writer (an append, a
// view, a summary, a snapshot): from then on every write is refused (ErrFailed) until the store is reopened. A
// writer that keeps state the log must hold (the commands engine) stops with it, rather than learn it at its next
// append, and Err says why.
func (l *Log) Failed() <-chan struct{} { return l.failedCh }

// Err returns the write or sync error that failed the log stop, or nil while it has not.
func (l *Log) Err() error {
	if p := l.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// fail records err as the log's failure unless one is recorded already, and closes Failed's channel.
//
// NB: without l.mu, which an append holds while it waits inside Pebble: once two memtables wait for a flush that
// fails (a full disk), that wait never ends, and a failure recorded under l.mu was never recorded. The appends, which
// check it under l.mu (refusal), are refused from the next one on, as they were.
func (l *Log) fail(err error) {
	if l.failed.CompareAndSwap(nil, &err) {
		close(l.failedCh)
	}
}
