package eventlog

// Failed returns a channel closed when the log fails stop, after a write or sync error of any writer (an append, a
// view, a summary, a snapshot): from then on every write is refused (ErrFailed) until the store is reopened. A
// writer that keeps state the log must hold (the commands engine) stops with it, rather than learn it at its next
// append, and Err says why.
func (l *Log) Failed() <-chan struct{} { return l.failedCh }

// Err returns the write or sync error that failed the log stop, or nil while it has not.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// fail records a write error: the log fails stop.
func (l *Log) fail(err error) {
	l.mu.Lock()
	l.failLocked(err)
	l.mu.Unlock()
}

// failLocked records err as the log's failure unless one is recorded already, and closes Failed's channel. Called
// with l.mu held.
func (l *Log) failLocked(err error) {
	if l.failed == nil {
		l.failed = err
		close(l.failedCh)
	}
}
