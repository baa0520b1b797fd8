package commands

import "time"

// commitPoint is a point of the commit path (group.go, pipeline.go) at
// which a test may stop the engine as a crash would.
type commitPoint int

const (
	// pointDecided (writer): the group is decided and applied to the
	// working state; nothing of it is handed to the log, nothing published,
	// nobody answered. The groups before it may still be in flight.
	pointDecided commitPoint = iota
	// pointDurable (publisher): the group's sync returned, so it and every
	// group before it are durable; nothing of it is published and nobody
	// answered. (Between the hand-off to Pebble and the sync,
	// eventlog.Options.BeforeSync is the crash point.)
	pointDurable
	// pointPublished (publisher): readers see the group; nobody is
	// answered yet.
	pointPublished
)

// testHooks let tests force interleavings instead of hoping for them.
type testHooks struct {
	// queued is called by Submit once its request is in the queue.
	queued func()
	// decidedCommands is called by the writer with the commands it has just
	// decided into the open group (which may stay open for more).
	decidedCommands func(ps []*pending)
	// commit is called at each commitPoint with the group being committed,
	// by the writer (pointDecided) or the publisher (the others), so
	// possibly two calls at once for two groups; a non-nil error fails the
	// commit there (the engine fails stop), as a crash would.
	commit func(point commitPoint, group []*pending) error
	// lingerClock, when set, stands in for the clock the linger reads: the
	// writer asks it whenever the open group is smaller than the callers
	// of the group whose sync just returned (pipeline.go), with the sync
	// it measured (hand-off to the sync's return) and how long ago the
	// sync returned, and goes by the two it gives back.
	lingerClock func(sync, since time.Duration) (time.Duration, time.Duration)
	// lingerEnd, when set, is asked by the writer when it lingers, for
	// wait, with the channel that ends the linger (nil: the engine's own
	// timer; the group also goes once it holds that many commands).
	lingerEnd func(wait time.Duration) <-chan time.Time
	// elapsed, when set, stands in for the monotonic clock the engine's time goes on by while the wall clock is
	// behind it (engine_time.go).
	elapsed func() time.Duration
	// stuckWriterGraceEnd, when set, is asked by the engine once its log failed stop (stopWithLog), for the grace it
	// leaves its writer (stuckWriterGrace), with the channel that ends the grace (nil: the engine's own timer).
	stuckWriterGraceEnd func(grace time.Duration) <-chan time.Time
	// pipelineFull is called by the writer when it waits for a flight (acquire): every one is in flight, pipelineDepth
	// groups handed to the log and not yet published, or held by a pass that settles.
	pipelineFull func()
	// missingViews is called by each pass of the missing views of cold runs as it starts (writeMissingViews), in the
	// goroutine that writes them.
	missingViews func()
	// missingViewsDecided is called by the writer at each eviction pass (maybeSaveViews), with whether a pass of the
	// missing views of cold runs is due there (missingViewsTurn) and whether it starts (no pass of the views runs):
	// a test counts the passes as they are decided, where one that starts late in its goroutine (missingViews) could
	// be missed by a wait of any length.
	missingViewsDecided func(due, starts bool)
}

// hook runs the commit hook at point, if a test set one.
func (e *Engine) hook(point commitPoint, group []*pending) error {
	if h := e.opts.hooks; h != nil && h.commit != nil {
		return h.commit(point, group)
	}
	return nil
}
