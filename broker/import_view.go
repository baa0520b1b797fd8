package broker

import (
	"errors"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// The import checkpoints' view (projections.ImportCheckpoints) is kept fresh from two sides: an import.checkpoints
// read that folded many checkpoints past it saves a new one, and the feed, which follows the whole log, counts the
// checkpoints recorded and refreshes the view in the background after every projections.ImportViewEvery of them. So
// a follower that starts after weeks of following reads the view and at most a few thousand checkpoints, not every
// one recorded while it ran.

// saveImportView saves set as the view, one save at a time: a save that finds another under way is left out (the
// other's serves as well). A failure is logged, not returned: the view is derived data, and a read without it only
// folds more. NB: none is saved while the disk is below its free-space minimum (the engine's CheckSpace), as no
// snapshot is: the space left is the log's, and a write the full disk refuses fails the log stop, which a read (a
// follower starting) would then have done.
func (s *Server) saveImportView(set *projections.ImportCheckpoints) {
	if s.eng.CheckSpace() != nil {
		return
	}
	if !s.importViewSaving.CompareAndSwap(false, true) {
		return
	}
	defer s.importViewSaving.Store(false)
	if err := set.Save(s.log); err != nil && !errors.Is(err, eventlog.ErrReadOnly) {
		s.lg.Warn("broker: the import checkpoints' view was not saved; reads fold the checkpoints after the last one",
			"err", err)
	}
}

// importCheckpointSeen counts, for the feed (its goroutine only), a checkpoint recorded, and starts a refresh of the
// view once enough were. The refresh stops when the server closes.
func (s *Server) importCheckpointSeen(stream string) {
	if stream != events.ImportStream {
		return
	}
	s.importSince++
	if s.importSince < projections.ImportViewEvery || s.importViewSaving.Load() {
		return
	}
	s.importSince = 0
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		set, err := projections.LoadImportCheckpoints(s.life, s.log)
		if err != nil {
			if s.life.Err() == nil {
				s.lg.Warn("broker: the import checkpoints could not be read to refresh their view", "err", err)
			}
			return
		}
		if set.SaveDue() {
			s.saveImportView(set)
		}
	}()
}
