package picrew

import "cmp"

// eventTails are the followed event-log files of a run that are not gone, by inode: where a new archive finds the
// file a rotation renamed to it (followedFiles). Of several of one inode (a hard link, or a file renamed again before
// the listing that marks its old name gone), it keeps the one read furthest, then the first in path order, as the
// files hold the same bytes: a look among every tail for each new archive was quadratic in a run's files.
type eventTails map[int64]*tailState

// eventTails indexes r's followed event-log files, a step each (listWork).
func (f *Follower) eventTails(r *runFollower) eventTails {
	byInode := eventTails{}
	for _, t := range r.tails {
		f.listWork++
		byInode.add(t)
	}
	return byInode
}

// add indexes t if it is an event-log file followed, of a known inode, read further than the one of its inode
// indexed (or as far, of a path that sorts first). A nil index is left as it is: none was needed yet.
func (byInode eventTails) add(t *tailState) {
	if byInode == nil || t.kind != eventsFile || t.gone || t.inode == 0 {
		return
	}
	if kept := byInode[t.inode]; kept != nil && cmp.Or(cmp.Compare(kept.offset, t.offset), cmp.Compare(t.rel,
		kept.rel)) >= 0 {
		return
	}
	byInode[t.inode] = t
}
