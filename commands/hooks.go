package commands

// commitPoint is a point of the commit path (group.go) at which a test may
// stop the engine as a crash would.
type commitPoint int

const (
	// pointDecided: the group is decided and applied to the working state;
	// nothing is appended, nothing published, nobody answered.
	pointDecided commitPoint = iota
	// pointDurable: Append returned, so the group is synced; nothing is
	// published and nobody answered. (Between the hand-off to Pebble and
	// the sync, eventlog.Options.BeforeSync is the crash point.)
	pointDurable
	// pointPublished: readers see the group; nobody is answered yet.
	pointPublished
)

// testHooks let tests force interleavings instead of hoping for them.
type testHooks struct {
	// queued is called by Submit once its request is in the queue.
	queued func()
	// commit is called by the writer at each commitPoint with the group
	// being committed; a non-nil error fails the commit there (the engine
	// fails stop), as a crash would.
	commit func(point commitPoint, group []*pending) error
}

// hook runs the commit hook at point, if a test set one.
func (e *Engine) hook(point commitPoint, group []*pending) error {
	if h := e.opts.hooks; h != nil && h.commit != nil {
		return h.commit(point, group)
	}
	return nil
}
