package picrew

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/crewlog/crewlog/events"
)

// fileKind is what a followed JSONL file holds.
type fileKind int

const (
	eventsFile fileKind = iota
	mailboxFile
	steeringFile
)

// tailState is a followed file: its tail, what it holds, and whether its
// checkpoint is behind.
type tailState struct {
	tail
	kind   fileKind
	taskID string // the steering file's task
	dirty  bool
	gone   bool
	// cut: the file is there, but past the first maxRunFiles of its kind (firstRunFiles) at the last listing, so not
	// read; its checkpoint stands, and it is read on from there once it is within them again.
	cut bool
	// waited: a pass found the live file (events.jsonl, a mailbox's inbox.jsonl or outbox.jsonl) replaced and left
	// the new file to the next (waitsForArchive), which reads what it finds.
	waited bool
	// readIn is the last pass of its run (runFollower.passes) that read the file to its end, or found it replaced or
	// rewritten (readTail), or the pass after one whose size noted (tail.mark) the file is read up to; 0: none.
	readIn uint64
}

// stamp tells whether a file changed: pi-crew rewrites its whole files
// with a rename (a new inode) and appends to the others (a new size).
type stamp struct {
	inode, size int64
	mtime       time.Time
}

// stampOf is the stamp of the regular file at p; anything else is an
// error (statFile).
func (c *crewRoot) stampOf(p string) (stamp, error) {
	st, err := c.statFile(p)
	if err != nil {
		return stamp{}, err
	}
	return stampOfInfo(st), nil
}

func stampOfInfo(st fs.FileInfo) stamp {
	var inode int64
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		inode = int64(sys.Ino)
	}
	return stamp{inode: inode, size: st.Size(), mtime: st.ModTime()}
}

// wholeFile is a file pi-crew rewrites as a whole (manifest.json,
// tasks.json, delivery.json) as last read: its checkpoint is its size and
// the hash of its content.
type wholeFile struct {
	rel        string
	st         stamp
	hash       string
	reconciled bool // the manifest, once the run was reconciled with it
	dirty      bool
}

func (w *wholeFile) checkpoint() events.ImportCheckpoint {
	return events.ImportCheckpoint{Source: events.ForeignSourcePicrew, Path: w.rel, Inode: w.st.inode,
		Size: w.st.size, Offset: w.st.size, LastLineHash: w.hash, Reconciled: w.reconciled}
}

// readWhole reads a whole file if it changed since w (nil: never read) and
// since it was read and refused at stamp refused (zero: never); changed is
// false when its stamp is the same. It reads with readFile: a
// regular file of at most maxWholeFile bytes, else an error. The stamp
// returned is the one of what was read.
func (c *crewRoot) readWhole(p string, w *wholeFile, refused stamp) (b []byte, st stamp, changed bool, err error) {
	if st, err = c.stampOf(p); err != nil {
		return nil, st, false, err
	}
	if (w != nil && w.st == st) || st == refused {
		return nil, st, false, nil
	}
	if st.size > maxWholeFile {
		// NB: refused by its stat, not opened: refused unread, it is never the file last read (w), and a file past
		// the cap (a worker's delivery.json growing with its messages) was opened at every pass.
		return nil, st, false, &tooLargeError{size: st.size, limit: maxWholeFile}
	}
	b, info, err := c.readFile(p)
	if err != nil {
		return nil, st, false, err
	}
	return b, stampOfInfo(info), true, nil
}

// runFollower is the follower's state of one run: the planner (what was
// planned so far), the followed files and the writes not yet answered.
type runFollower struct {
	id, dir string
	p       *planner
	tails   map[string]*tailState // by absolute path
	seqs    map[uint64]bool       // events.jsonl seqs planned
	maxSeq  uint64
	steers  map[string]bool // steering lines planned (task and id)
	pending []planned
	// pendingBytes are the bytes of the lines read since pending was last empty (maxPendingBytes).
	pendingBytes int64
	// passes counts the passes that read the run's files, and mailboxesReadIn is the earliest of its mailbox files'
	// last passes that read them for a steering line (tailState.readIn), as the pass reading them found it (it reads
	// them before the steering files: listFiles): a steering line held in pass h waits until it is past h (planLine).
	passes          uint64
	mailboxesReadIn uint64
	// tasksReread: tasks.json was read again since the file being read was (readTail), for a line naming a task the
	// tasks read lacked (planLine). tasksFailed: the last read of tasks.json failed (readFailed).
	tasksReread bool
	tasksFailed bool
	// deliveryCut: delivery.json held more states than kept when last read (deliveryStates.over), and deliveryKnew
	// is the count of messages planned then.
	deliveryCut  bool
	deliveryKnew int
	// primed: every file listed when the run was primed was read up to its checkpoint (prime); a file listed after
	// that with a checkpoint is too, as it is first listed (followedFiles).
	primed bool
	// unread: the last sync stopped reading at maxPending, so the files may
	// hold lines not read yet (a pass is not settled then).
	unread bool

	whole map[string]*wholeFile // manifest.json, tasks.json, delivery.json by name
	// refused is the stamp of the manifest last read and refused (it did not decode, or named another run:
	// refusedStop), so that it is read again only once it changes. NB: read at every pass, a worker's manifest of
	// 16 MiB that does not decode cost the follower 16 MiB a second.
	refused     stamp
	refusedStop bool
	lastChange  time.Time
	firstSeen   time.Time // when a run without a readable manifest was first seen
	reconciled  string    // the manifest status the run was reconciled for
	gone        bool
	// dormant: at start every file matched its checkpoint and the run was
	// reconciled, so nothing was read; seen holds what the files looked
	// like then, and the first change wakes the run (priming it).
	dormant bool
	seen    map[string]stamp
}

func newRunFollower(id, dir string) *runFollower {
	return &runFollower{id: id, dir: dir, tails: map[string]*tailState{}, seqs: map[uint64]bool{},
		steers: map[string]bool{}, whole: map[string]*wholeFile{}}
}

// holding reports whether a steering line of the run waits for its mailbox message.
func (r *runFollower) holding() bool {
	for _, t := range r.tails {
		if t.heldIn != 0 {
			return true
		}
	}
	return false
}

func (r *runFollower) anyDirty() bool {
	for _, t := range r.tails {
		if t.dirty {
			return true
		}
	}
	for _, w := range r.whole {
		if w.dirty {
			return true
		}
	}
	return false
}

// wholePaths are a run's whole files, by name.
var wholeNames = []string{"manifest.json", "tasks.json", "delivery.json"}

func (r *runFollower) wholePath(name string) string {
	if name == "delivery.json" {
		return filepath.Join(r.dir, "mailbox", name)
	}
	return filepath.Join(r.dir, name)
}

// sawWhole records what a whole file held when read.
func (f *Follower) sawWhole(r *runFollower, name string, st stamp, b []byte) {
	w := r.whole[name]
	if w == nil {
		w = &wholeFile{rel: f.src.rel(r.wholePath(name))}
		r.whole[name] = w
	}
	h := lineHash(b)
	if h != w.hash {
		w.reconciled = false
	}
	w.st, w.hash, w.dirty = st, h, true
	r.lastChange = f.o.now()
}

// maxPending bounds the writes a run may have waiting for the daemon: past
// it the run's files are not read further until the daemon takes them, so
// a daemon away for long costs the follower no more memory than this. NB:
// it is checked before each line, not once a pass: a pass reads up to
// maxTailRead bytes of every file of the run, tens of thousands of short
// lines each.
const maxPending = 10_000

// maxPendingBytes bounds, in bytes of the lines read, the writes a run may have waiting for the daemon, as maxPending
// bounds their number: a line may be up to maxTailRead bytes (a foreign event's data is kept whole), and 10,000 of
// them were gigabytes. The run reads on past it by one line at most.
const maxPendingBytes = 16 << 20

// waiting is how many writes the run has that the daemon has not answered:
// those pending and those planned since the last drain.
func (r *runFollower) waiting() int {
	n := len(r.pending)
	if r.p != nil {
		n += len(r.p.writes)
	}
	return n
}

// full reports whether the run has as many writes waiting for the daemon as it may hold (maxPending,
// maxPendingBytes): its files are not read further until the daemon takes them.
func (r *runFollower) full() bool {
	return r.waiting() >= maxPending || r.pendingBytes >= maxPendingBytes
}

// terminalRun reports whether a manifest status is one a run ends in.
func terminalRun(st string) bool { return st == "completed" || st == "failed" || st == "cancelled" }

// syncRun reads what changed in one run's files and plans the writes.
func (f *Follower) syncRun(r *runFollower, w *watcher) {
	r.unread = false
	if r.gone {
		return
	}
	if _, err := os.Stat(r.dir); errors.Is(err, fs.ErrNotExist) {
		f.gone(r, w)
		return
	}
	if len(r.pending) == 0 {
		r.pendingBytes = 0 // the daemon took every write of the lines read
	}
	if r.full() {
		r.unread = true
		return // the daemon is behind or away: read on once it has taken these
	}
	// NB: set by a read of the run's files that fails in this pass (readFailed): the pass then takes no file it could
	// not list for removed, lets no steering line go without its message, and does not reconcile the run with what it
	// read before; a later pass reads the files again.
	f.src.failed = false
	defer func() {
		if w != nil {
			w.addRun(r, f.src.steeringDir(r.id))
		}
	}()
	if r.p == nil {
		if r.dormant && !f.wakes(r) {
			return
		}
		if !r.dormant && f.settledAtStart(r) {
			r.dormant = true
			return
		}
		r.dormant, r.seen = false, nil
	}
	s := f.src
	mp := r.wholePath("manifest.json")
	b, st, changed, err := f.src.files().readWhole(mp, r.whole["manifest.json"], r.refused)
	switch {
	case err != nil && r.p == nil:
		// pi-crew makes the directory, then writes the manifest: only one
		// that stays missing is worth a line.
		if r.firstSeen.IsZero() {
			r.firstSeen = f.o.now()
		}
		if !errors.Is(err, fs.ErrNotExist) || f.o.now().Sub(r.firstSeen) >= f.o.SettleAfter {
			s.skip(r.id, s.rel(mp), 0, 0, "run not followed yet: manifest unreadable: %v", err)
		}
		return
	case err != nil:
		s.unreadable(r.id, mp, err, "manifest unreadable, the last one read stands: %v")
	case changed:
		m, err := s.parseManifest(r.id, s.rel(mp), b)
		if err != nil {
			// pi-crew writes it atomically, so this is a damaged file or
			// another writer's: keep the last one read.
			s.skip(r.id, s.rel(mp), 0, 0, "manifest does not decode, the last one read stands: %v", err)
			r.refused, r.refusedStop = st, false
			if r.p == nil {
				return
			}
			break
		}
		if m.RunID != "" && m.RunID != r.id {
			s.skip(r.id, s.rel(mp), 0, 0, "run not imported: manifest names run %q", m.RunID)
			r.refused, r.refusedStop = st, true
			return
		}
		if r.p == nil {
			tasks := f.tasksToPrime(r)
			if readFailed(tasks.err) {
				return // primed once tasks.json can be read
			}
			f.sawWhole(r, "manifest.json", st, b)
			f.prime(r, m, tasks)
		} else {
			f.sawWhole(r, "manifest.json", st, b)
			r.p.r.manifest = m
		}
	case st == r.refused && (r.refusedStop || r.p == nil):
		return // refused when read, and unchanged since
	}
	p := r.p
	f.readTasks(r)
	r.passes++
	r.mailboxesReadIn = r.passes
	for _, path := range f.followedFiles(r) {
		// NB: the mailbox files are listed before the steering files (listFiles), so a steering line waiting for its
		// message (planLine) is let go by what this and earlier passes read of them: each file read to its end once
		// after the line was, in a pass of its own or not. A file not listed is gone, or the listing failed
		// (src.failed), which holds the line anyway.
		t := r.tails[path]
		if f.readTail(r, path, t, -1) {
			t.readIn = r.passes
		}
		if t.kind == mailboxFile {
			t.readIn = max(t.readIn, t.markRead())
			r.mailboxesReadIn = min(r.mailboxesReadIn, t.readIn)
		}
	}
	f.markMailboxes(r)
	dp := r.wholePath("delivery.json")
	read := r.whole["delivery.json"]
	if r.deliveryCut && len(p.msgs) > r.deliveryKnew {
		// NB: a file of more states than kept ranks the states of the messages read when it was read first (the run's
		// messages read so far); read again once more are, or a message whose line was read after the file, its state
		// left out as another id's, was recorded as its line says (queued) until the file changed.
		read = nil
	}
	if b, st, changed, err := f.src.files().readWhole(dp, read, stamp{}); err == nil && changed {
		if w := r.whole["delivery.json"]; w == nil || w.st != st {
			f.sawWhole(r, "delivery.json", st, b) // not when read again unchanged: the run did not change
		}
		planned := func(msgID string) bool { _, ok := p.msgs[msgID]; return ok }
		d, over, ok := s.parseDelivery(r.id, s.rel(dp), b, planned)
		r.deliveryCut, r.deliveryKnew = over, len(p.msgs)
		if ok {
			p.r.delivery = d
			for _, id := range sortedKeys(d) {
				p.delivery(id, d[id])
			}
		}
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.unreadable(r.id, dp, err, deliveryUnreadable)
	}
	if !terminalRun(p.r.manifest.Status) {
		// NB: a run resumed has left the end it was reconciled for; the end it reaches next, the same one or another,
		// is reconciled again (only the reconcile records its tasks' usage and allocations).
		r.reconciled = ""
	}
	// NB: nor while lines of the run are left unread (r.unread: a replaced live file left to the next pass, or the
	// daemon behind): the reconcile records from the state files the ends those lines record, and they were recorded
	// twice, the event after its reconcile.
	if st := p.r.manifest.Status; terminalRun(st) && r.reconciled != st && !s.failed && !r.unread &&
		f.o.now().Sub(r.lastChange) >= f.o.SettleAfter {
		p.reconcile()
		r.reconciled = st
		if m := r.whole["manifest.json"]; m != nil {
			// Checkpointed once the reconcile's writes are answered.
			m.reconciled, m.dirty = true, true
		}
	}
	r.pending = append(r.pending, p.drain()...)
}

// markMailboxes notes the size each mailbox file of the run has now, after the pass read the steering files
// (tail.mark), when a steering line waits for its message and the file is not read for it yet, nor has a size noted.
// pi-crew's broker appends a steer's message before its steering line, so a message of a line held by now lies within
// that size: the file read up to it is read for the line (readIn, planLine), though it grew since. NB: a file that
// grew by more than a pass reads (maxTailRead) before every pass was never read to its end, and held every steering
// line of its run for as long as its writer kept ahead. A size noted is kept until it is read up to: noted again at
// every pass, it moved with the file's end.
func (f *Follower) markMailboxes(r *runFollower) {
	var newest uint64 // the latest pass in which a line now held was first held
	for _, t := range r.tails {
		newest = max(newest, t.heldIn)
	}
	if newest == 0 {
		return
	}
	for path, t := range r.tails {
		if t.kind != mailboxFile || t.gone || t.inode == 0 || t.markIn != 0 || t.readIn > newest {
			continue
		}
		// NB: a file replaced since it was read is read from its start at the next pass, which counts it read.
		if inode, size, err := f.src.files().fileID(path); err == nil && inode == t.inode {
			t.mark, t.markIn = size, r.passes
		}
	}
}

// readTasks reads the run's tasks.json again if it changed since it was read, and plans its new workflow tasks.
func (f *Follower) readTasks(r *runFollower) {
	s, tp := f.src, r.wholePath("tasks.json")
	b, st, changed, err := s.files().readWhole(tp, r.whole["tasks.json"], stamp{})
	r.tasksFailed = readFailed(err)
	if err == nil && changed {
		f.sawWhole(r, "tasks.json", st, b)
		if tasks, err := s.parseTasks(r.id, s.rel(tp), b); err != nil {
			// NB: as for the manifest: taken for a run without tasks, every task line read until it decoded again
			// named no task and was skipped for good.
			s.skip(r.id, s.rel(tp), 0, 0, "tasks.json does not decode, the tasks read before stand: %v", err)
		} else {
			r.p.setTasks(tasks)
			r.p.newTasks()
		}
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		// NB: a follower that read none (starting) has the one-shot import's tasks: none, and says so as it does.
		reason := tasksNotReadReason(err)
		if r.whole["tasks.json"] != nil {
			reason = "tasks.json not read, the tasks read before stand: %v"
			if readFailed(err) {
				reason = "tasks unreadable, the tasks read before stand: %v"
			}
		}
		s.unreadable(r.id, tp, err, reason)
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// maybeSleep lets go of a finished run once it is reconciled and every
// checkpoint of it is written: it becomes dormant, as if found settled at
// start, so a crew root with many finished runs holds the state of its live
// runs only. A change to its files wakes it (primed from the checkpoints).
func (f *Follower) maybeSleep(r *runFollower) {
	if r.p == nil || r.gone || len(r.pending) > 0 || r.anyDirty() {
		return
	}
	st := r.p.r.manifest.Status
	if !terminalRun(st) || r.reconciled != st || !f.settledAtStart(r) {
		return
	}
	*r = runFollower{id: r.id, dir: r.dir, tails: map[string]*tailState{}, seqs: map[uint64]bool{},
		steers: map[string]bool{}, whole: map[string]*wholeFile{}, dormant: true, seen: r.seen}
}

// settledAtStart reports whether a run needs no reading at start: its
// manifest was checkpointed reconciled, and every file of the run matches
// its checkpoint (same identity, read to its end). It records what the
// files looked like, so wakes can tell a change.
func (f *Follower) settledAtStart(r *runFollower) bool {
	c, ok := f.cks[f.src.rel(r.wholePath("manifest.json"))]
	if !ok || !c.Reconciled {
		return false
	}
	seen := map[string]stamp{}
	// matches: the file is as checkpointed (absent when it was absent),
	// its content hashing as recorded (whole: the file, else its last
	// line read). held is what the follower read of a whole file, if it
	// did.
	matches := func(p string, whole bool, held *wholeFile) bool {
		c, ok := f.cks[f.src.rel(p)]
		st, err := f.src.files().stampOf(p)
		if err != nil {
			return !ok || c.Gone
		}
		seen[p] = st
		if !ok || c.Gone || st.inode != c.Inode || st.size != c.Offset {
			return false
		}
		if !whole {
			if t := r.tails[p]; t != nil && c.LastLineHash != "" && t.inode == c.Inode && t.offset == c.Offset &&
				t.hash == c.LastLineHash {
				// NB: read to its checkpoint by this follower, which looks at it at every pass (readTail): not read
				// back. maybeSleep asks after every pass, and a run that cannot be let go (a partial last line keeps
				// its file from matching) had the last line of each of its other files read back at every pass.
				return true
			}
			good, _ := f.src.files().resumable(p, c)
			return good
		}
		if held != nil && held.st == st {
			// NB: not read again at the stamp it was read at. maybeSleep
			// asks after every pass, and a run that cannot be let go (a
			// partial last line keeps its file from matching) would have
			// its whole files, up to maxWholeFile each, read at every pass.
			return held.hash == c.LastLineHash
		}
		b, _, err := f.src.files().readFile(p)
		return err == nil && lineHash(b) == c.LastLineHash
	}
	for _, name := range wholeNames {
		if !matches(r.wholePath(name), true, r.whole[name]) {
			return false
		}
	}
	files, complete := f.listFiles(r, false)
	if !complete {
		return false
	}
	for _, p := range files {
		if !matches(p.path, false, nil) {
			return false
		}
	}
	r.seen = seen
	return true
}

// wakes reports whether a dormant run changed since it was found settled.
func (f *Follower) wakes(r *runFollower) bool {
	now := map[string]stamp{}
	for _, name := range wholeNames {
		if st, err := f.src.files().stampOf(r.wholePath(name)); err == nil {
			now[r.wholePath(name)] = st
		}
	}
	files, complete := f.listFiles(r, false)
	if !complete {
		return false // nothing seen to change: asked again at a later pass
	}
	for _, p := range files {
		if st, err := f.src.files().stampOf(p.path); err == nil {
			now[p.path] = st
		}
	}
	if len(now) != len(r.seen) {
		return true
	}
	for p, st := range now {
		if r.seen[p] != st {
			return true
		}
	}
	return false
}

// tasksRead is a read of a run's tasks.json (readWhole).
type tasksRead struct {
	b       []byte
	st      stamp
	changed bool
	err     error
}

// tasksToPrime reads the tasks.json of run r, not primed yet, reporting a read that failed (readFailed). NB: the run
// is not primed then: primed without tasks, its files were read up to their checkpoints as a run's without any, every
// line naming a task skipped, and the messages of a task's inbox were unknown to the follower, which never recorded
// the states delivery.json gave them since (an acknowledgement).
func (f *Follower) tasksToPrime(r *runFollower) tasksRead {
	tp := r.wholePath("tasks.json")
	var t tasksRead
	t.b, t.st, t.changed, t.err = f.src.files().readWhole(tp, nil, stamp{})
	if readFailed(t.err) {
		f.src.unreadable(r.id, tp, t.err, tasksUnreadable)
	}
	return t
}

// prime starts following a run: its planner from the manifest and
// tasks.json (read by tasksToPrime), run.created and the workflow tasks
// planned (they answer replayed when recorded), then every followed file
// read up to its checkpoint with the writes dropped: the checkpoint says
// the daemon recorded them, and this only rebuilds what the planner knew.
func (f *Follower) prime(r *runFollower, m manifest, tasks tasksRead) {
	s := f.src
	r.p = newPlanner(s, &run{id: r.id, manifest: m, delivery: map[string]string{}}, time.Now)
	if tasks.err == nil && tasks.changed {
		f.sawWhole(r, "tasks.json", tasks.st, tasks.b)
		rel := s.rel(r.wholePath("tasks.json"))
		if parsed, err := s.parseTasks(r.id, rel, tasks.b); err != nil {
			s.skip(r.id, rel, 0, 0, tasksUndecodable, err)
		} else {
			r.p.setTasks(parsed)
		}
	}
	// run.created and the workflow tasks first: the history read below
	// moves the statuses they start.
	r.p.runCreated()
	r.p.newTasks()
	r.pending = append(r.pending, r.p.drain()...)
	for _, path := range f.followedFiles(r) {
		f.resume(r, path, r.tails[path], true)
	}
	r.primed = true
	r.p.drain()
	if r.p.r.manifest.Status != "" && terminalRun(r.p.r.manifest.Status) && len(r.seqs) > 0 {
		r.lastChange = time.Time{} // a finished run read from its checkpoints is settled already
	}
}

// resume reads the followed file at path (its tail t, new) up to its checkpoint with the writes dropped, to rebuild
// what the planner knew of it; with renamed, an archive without a checkpoint of its own resumes from the one of the
// live file it was renamed from (renamedFrom). A file without a checkpoint, or whose checkpoint says gone, is read
// from its start.
func (f *Follower) resume(r *runFollower, path string, t *tailState, renamed bool) {
	s := f.src
	c, ok := f.cks[t.rel]
	fromLive := false
	if !ok && renamed {
		c, fromLive = f.renamedFrom(path, t.kind)
		ok = fromLive
	}
	if !ok || c.Gone {
		return
	}
	if ok, why := s.files().resumable(path, c); !ok {
		s.skip(r.id, t.rel, 0, 0, "%s: read again from the start (the command ids keep it from doubling)", why)
		return
	}
	t.inode = c.Inode
	planned := len(r.p.writes)
	// NB: read as at a start, its messages' states from their lines, delivery.json's planned after (as the first
	// pass after prime plans them): a follower started while the file was past the cap read delivery.json before it
	// knew them, and a state it gave them since, planned with the lines and dropped, was never recorded.
	delivery := r.p.r.delivery
	r.p.r.delivery = map[string]string{}
	for t.offset < c.Offset {
		before := t.offset
		f.readTail(r, path, t, c.Offset)
		if t.offset == before {
			break
		}
	}
	// NB: the writes of the lines read again are dropped, as the checkpoint says the daemon recorded them; those
	// planned before (a pass's new tasks) are kept.
	if len(r.p.writes) > planned {
		r.p.writes, r.p.cur = r.p.writes[:planned], nil
	}
	r.p.r.delivery = delivery
	for _, id := range sortedKeys(delivery) {
		r.p.delivery(id, delivery[id])
	}
	// NB: an archive resumed from its live file's checkpoint is checkpointed under its own name, even when nothing is
	// left of it to read: the live file's checkpoint is the new file's once that is read.
	t.dirty = fromLive
}

// renamedFrom is the checkpoint of the live file the archive at path, of kind, was renamed from while no follower
// ran (a rotation: events.jsonl, or a mailbox's inbox.jsonl or outbox.jsonl, of its directory), when the archive has
// none of its own; ok is false when the live file's checkpoint is of another file (inode), or of none read. NB: a
// restart read such an archive from its start as new, every line of it decided and sent again. The caller resumes
// from it only as from the archive's own (resumable: the line read last is where it was), so a file of that inode
// with other content (a worker's, rewritten in place) is read from its start, and a hard link of the live file (a
// worker's) resumes as the live file does, its lines after the checkpoint read twice and recorded once.
func (f *Follower) renamedFrom(path string, kind fileKind) (c events.ImportCheckpoint, ok bool) {
	live, ok := liveOfArchive(kind, path)
	if !ok {
		return c, false
	}
	c, ok = f.cks[f.src.rel(live)]
	if !ok || c.Gone || c.Offset == 0 {
		return c, false
	}
	inode, _, err := f.src.files().fileID(path)
	return c, err == nil && inode == c.Inode
}

// liveOfArchive is the live file an archive of kind at path is named for (events.jsonl.<ts>.archive.jsonl:
// events.jsonl; a mailbox's inbox.jsonl.<ts>.archive.jsonl: its inbox.jsonl), in its directory; ok is false for a
// file that is no archive.
func liveOfArchive(kind fileKind, path string) (live string, ok bool) {
	name := filepath.Base(path)
	if !strings.HasSuffix(name, ".archive.jsonl") {
		return "", false
	}
	for _, l := range []string{"events.jsonl", "inbox.jsonl", "outbox.jsonl"} {
		if strings.HasPrefix(name, l+".") && liveFile(kind, l) {
			return filepath.Join(filepath.Dir(path), l), true
		}
	}
	return "", false
}

// listed is one JSONL file of a run.
type listed struct {
	path   string
	kind   fileKind
	taskID string
}

// listFiles lists a run's JSONL files (events and archives, mailboxes,
// steering); with report, what else is there is reported (once). complete
// is false when a listing failed (readFailed): files may be missing from
// the list, not from the run.
func (f *Follower) listFiles(r *runFollower, report bool) (out []listed, complete bool) {
	s := f.src
	skip := func(p, why string) {
		if report {
			s.skip(r.id, s.rel(p), 0, 0, "%s", why)
		}
	}
	from := s // what the listings report to: nowhere without report
	if !report {
		from = &source{root: s.root, crew: s.files()}
	}
	strays := func(dir, what string) *strayEntries { return &strayEntries{s: from, run: r.id, dir: dir, what: what} }
	entries, err := readDir(s.files(), r.dir)
	complete = !readFailed(err)
	if err != nil {
		skip(r.dir, "unreadable: "+pathless(err).Error()+" (retrying)")
	}
	// NB: the live events.jsonl is listed after its archives, which hold older seqs: a rotation leaves in the archive
	// the lines appended just before it, which a pass may not have read yet, and read after the live file they were
	// recorded after newer events (a settlement before its admission) and reported missing from it.
	var live, mail []listed
	runStrays := strays(r.dir, "the run's directory")
	for _, e := range entries {
		name, p := e.Name(), filepath.Join(r.dir, e.Name())
		switch {
		case name == "manifest.json" || name == "tasks.json" || isTemp(name):
		case name == "events.jsonl":
			live = append(live, listed{path: p, kind: eventsFile})
		case strings.HasPrefix(name, "events.jsonl.") && strings.HasSuffix(name, ".archive.jsonl"):
			out = append(out, listed{path: p, kind: eventsFile})
		case name == "mailbox" && e.IsDir():
			files, whole := from.mailboxFiles(r.id, p)
			complete = complete && whole
			for _, mp := range files {
				mail = append(mail, listed{path: mp, kind: mailboxFile})
			}
		default:
			runStrays.add(p, classify(name, "unknown file: not imported"))
		}
	}
	runStrays.done()
	out = firstRunFiles(out, "event-log archives", func(reason string) { skip(r.dir, reason) })
	out = append(append(out, live...), mail...)
	dir, steering, bad, err := s.steeringEntries(r.id)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		complete = complete && !readFailed(err)
		skip(bad, "steering files not read: "+err.Error())
	}
	var steers []listed
	steeringStrays := strays(dir, "the run's steering directory")
	for _, e := range steering {
		p := filepath.Join(dir, e.Name())
		taskID, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if e.IsDir() || !ok || !runIDPattern.MatchString(taskID) {
			if !isTemp(e.Name()) {
				steeringStrays.add(p, classify(e.Name(), "not a steering file: not imported"))
			}
			continue
		}
		if events.TaskIDReserved(taskID) {
			steeringStrays.add(p, reservedTaskFile("steering file", taskID))
			continue
		}
		steers = append(steers, listed{path: p, kind: steeringFile, taskID: taskID})
	}
	steeringStrays.done()
	steers = firstRunFiles(steers, "steering files", func(reason string) { skip(dir, reason) })
	return append(out, steers...), complete
}

// isTemp reports a temporary file of an atomic write in progress: it is
// gone a moment later, so a follower neither reads nor reports it.
func isTemp(name string) bool {
	return strings.HasSuffix(name, ".tmp") || strings.Contains(name, ".tmp-")
}

// followedFiles lists a run's JSONL files, adding a tail for each new one
// (a new archive takes over the position of the file it was renamed from),
// and reports files that went away. NB: in work linear in the files and
// tails (listWork): a run has up to 3 × maxRunFiles + 1 of them, and a look
// for each tail among the files listed, and for each new archive among the
// tails, was some 20 million steps a listing, every pass, for one run.
func (f *Follower) followedFiles(r *runFollower) []string {
	files, complete := f.listFiles(r, true)
	if !complete {
		f.src.failed = true
	}
	out := make([]string, 0, len(files))
	listed := make(map[string]bool, len(files))
	var renamed eventTails // made at the first new event-log file
	for _, l := range files {
		f.listWork++
		listed[l.path] = true
		if r.tails[l.path] == nil {
			t := &tailState{tail: tail{rel: f.src.rel(l.path)}, kind: l.kind, taskID: l.taskID}
			if inode, _, err := f.src.files().fileID(l.path); err == nil && l.kind == eventsFile {
				if renamed == nil {
					renamed = f.eventTails(r)
				}
				if old := renamed[inode]; old != nil {
					// A rotation renamed the live file: the archive is
					// what was read, read on from there.
					t.tail = old.tail
					t.rel, t.partial = f.src.rel(l.path), partialLine{}
					t.dirty = true
				}
			}
			r.tails[l.path] = t
			if r.primed && !t.dirty {
				// NB: a file first listed after the run was primed, with a checkpoint: one past the cap then
				// (firstRunFiles), within it now. Read from its start, its lines were decided again.
				f.resume(r, l.path, t, false)
			}
			renamed.add(t)
		} else if t := r.tails[l.path]; t.cut {
			t.cut = false // within the cap again: read on from where it was read
		} else if t.gone {
			// NB: it came back under its name (renamed away and back, or made again): followed again, and
			// checkpointed so. Kept gone, each checkpoint of it said gone (read as none), so its finished run never
			// matched its checkpoints and was never let go, and a restart read the file again from its start.
			t.gone, t.dirty = false, true
			renamed.add(t)
		}
		out = append(out, l.path)
	}
	for p, t := range r.tails {
		f.listWork++
		if !complete || t.gone || listed[p] {
			continue
		}
		// NB: a line of it waiting for its mailbox message is not read again while it is not listed, so it holds up
		// nothing (holding).
		t.heldIn = 0
		if _, _, err := f.src.files().fileID(p); err == nil {
			// NB: there, but past the first maxRunFiles of its kind: a file made that sorts before it shifted it out.
			// Not removed: its checkpoint stands (a gone one is read as none), for when it is within them again.
			if !t.cut {
				f.src.skip(r.id, t.rel, 0, 0, "past the first %d %s of its run, in the order they are read: "+
					"not read further (what was imported of it stays)", maxRunFiles, kindFiles(t.kind))
				t.cut = true
			}
			continue
		}
		f.src.skip(r.id, t.rel, 0, 0, "file removed: what was imported of it stays")
		t.gone, t.dirty, t.cut = true, true, false
	}
	return out
}

// kindFiles names the files of kind, as firstRunFiles' report does.
func kindFiles(kind fileKind) string {
	switch kind {
	case eventsFile:
		return "event-log archives"
	case mailboxFile:
		return "mailbox files"
	}
	return "steering files"
}

// readTail plans the complete lines a file gained. With upTo >= 0 it is
// priming: it reads only the lines that end at or before upTo, to rebuild
// the planner. through says whether it read every complete line the file
// held when it looked at it, or found it replaced or rewritten in place:
// either way, nothing the file held before is left to read (planLine).
func (f *Follower) readTail(r *runFollower, path string, t *tailState, upTo int64) (through bool) {
	replay := upTo >= 0
	s := f.src
	inode, size, err := f.src.files().fileID(path)
	if err != nil {
		switch {
		case readFailed(err):
			s.unreadable(r.id, path, err, "unreadable: %v (retrying)")
		case !errors.Is(err, fs.ErrNotExist):
			// NB: not a regular file, or a directory to it replaced by a link (errLinkDir) or a file since listed.
			s.skip(r.id, t.rel, 0, 0, "unreadable: %v", err)
		}
		// NB: or removed since listed: the next listing reports it. A file not read (not a regular file, or gone)
		// is read as absent, so it holds nothing of the run to read: through, or a steering line would wait on it
		// for good (planLine). One that failed is not (src.failed).
		return !readFailed(err)
	}
	if t.inode == 0 {
		t.inode = inode
	}
	if !replay && r.waitsForArchive(path, t, inode) {
		r.unread = true
		// NB: the next pass at once: with notifications, none may come for a file made whole by a rename (one
		// notification, taken by this pass), and it waited for the poll.
		f.notify(r.id)
		return false
	}
	// NB: a file replaced or rewritten is through even if what it holds now takes more than this read: a worker
	// rewriting its mailbox file (the last line read of one longer than maxTailRead) before every pass held every
	// steering line of its run that waited for it for good (planLine).
	replaced := false
	if changed, why := t.changed(inode, size); changed && !replay {
		s.skip(r.id, t.rel, 0, 0, "%s", why)
		t.reset(inode)
		replaced = true
	} else if !replay && t.partial.stays(t.offset, size) {
		// NB: all the file holds past what was read is the partial last line the last read found, at the same size:
		// read again, it yields nothing new. A line a writer killed mid-line left was read at every pass, with the
		// line before it read back (rewritten), for as long as the file stayed so: up to 8 MiB a file a pass.
		t.size = size
		f.notePartial(r, t, t.offset, size, true)
		return true
	} else if !replay && size != t.offset && t.rewritten(f.src.files(), path) {
		s.skip(r.id, t.rel, 0, 0,
			"rewritten in place (the last line read is no longer where it was): read again from the start")
		t.reset(inode)
		replaced = true
	}
	if size == t.offset {
		t.size = size
		return true
	}
	lines, partial, err := t.read(f.src.files(), path)
	switch {
	case errors.Is(err, errNotLookedAt):
		return replaced // the next pass looks at the file now under the name
	case errors.Is(err, errLongLine):
		s.skip(r.id, t.rel, int(t.lines+1), 0, "line longer than %d bytes: skipped", maxTailRead)
		t.offset += maxTailRead
		t.hash, t.lastLen, t.skipping, t.dirty = "", -1, true, true
		return replaced
	case err != nil:
		s.unreadable(r.id, path, err, "unreadable: %v (retrying)")
		return false
	}
	t.size = size
	r.tasksReread = false
	// NB: a read takes at most maxTailRead bytes: the lines past them are read at the next pass.
	toEnd := size-t.offset <= maxTailRead
	through = toEnd
	n := 0
	for _, l := range lines {
		if replay && l.end > upTo {
			through = false
			break
		}
		if !replay && r.full() {
			r.unread, through = true, false
			break // the rest waits for the daemon to take these (syncRun)
		}
		if !l.rest && !f.planLine(r, t, l, lines[len(lines)-1].end, replay) {
			through = false
			break // held: read again next pass
		}
		if !replay {
			r.pendingBytes += int64(len(l.text))
		}
		t.advance(f.src.files(), path, l)
		t.dirty = !replay
		if t.offset >= t.holdUpTo {
			t.heldIn = 0 // every line read with the held ones is through
		}
		n++
	}
	switch {
	case n > 0 && replay:
		f.count(func(st *FollowStats) { st.Reread += uint64(n) })
	case n > 0:
		r.lastChange = f.o.now()
		f.count(func(st *FollowStats) { st.Lines += uint64(n) })
	}
	if partial >= 0 && !replay {
		f.notePartial(r, t, partial, size, toEnd)
	}
	return through || replaced
}

// notePartial notes the partial last line at offset at of t's file, of size bytes, found by a read to the file's end
// or not (partialLine.observe, toEnd), and reports one that stayed so for SettleAfter, once.
func (f *Follower) notePartial(r *runFollower, t *tailState, at, size int64, toEnd bool) {
	stayed := t.partial.observe(at, size, f.o.now(), f.o.SettleAfter)
	t.partial.toEnd = toEnd
	if stayed {
		f.src.skip(r.id, t.rel, int(t.lines+1), 0,
			"partial last line (no newline yet) at byte %d, unchanged for %s: read when it is complete", at,
			f.o.SettleAfter)
	}
}

// waitsForArchive reports whether the live file at path (events.jsonl, or a mailbox's inbox.jsonl or outbox.jsonl),
// found as the file inode in place of the one t read, is left to the next pass: no archive this pass listed is t's
// file, and no pass left it already. NB: a rotation between the pass's listing and this read left the lines appended
// just before it, unread, in an archive the pass did not list; read now, the new file's newer events (or messages)
// were recorded before them and the events reported missing. The next listing finds the archive, if it is one (a
// compaction leaves none), and reads it first. Once only: a file replaced again at every pass (a worker's) would
// never be read.
func (r *runFollower) waitsForArchive(path string, t *tailState, inode int64) bool {
	if !liveFile(t.kind, filepath.Base(path)) || inode == t.inode || t.waited {
		t.waited = false
		return false
	}
	for p, o := range r.tails {
		// NB: an events archive took the file's tail over when listed (followedFiles); a mailbox archive, read from
		// its start, took its inode at its first read, before this one (mailboxOrder).
		if p != path && o.kind == t.kind && !o.gone && o.inode == t.inode {
			return false // listed: an archive holds the file, and was read first
		}
	}
	t.waited = true
	return true
}

// lacksTask reports whether the event line ev names a task the planner's tasks lack: its taskId, or the shadow a
// delegate.admitted admits (its subId), whose record the admission takes its title and cwd from (admit).
func lacksTask(p *planner, ev *teamEvent) bool {
	if ev.TaskID != "" && p.tasks[ev.TaskID] == nil {
		return true
	}
	if ev.Type != "delegate.admitted" {
		return false
	}
	d, err := ev.delegation()
	return err == nil && d.SubID != "" && p.tasks[d.SubID] == nil
}

// holdsForTasks reports whether a line naming a task the tasks read lack (lacks) waits for a later pass: it reads
// tasks.json again first, once a read of the file, and the line waits while tasks.json cannot be read. NB: pi-crew
// adds a task to tasks.json (a shadow, a workflow task) before it appends a line naming it, and the pass read
// tasks.json before this file: a task added, and its line appended, between the two reads had the line skipped for
// good (an admission recorded without its shadow's title and cwd). Read again after the line was, tasks.json holds
// the task; once a read of the file, as every line of it was read by then. Nor is the line taken for one naming no
// task while tasks.json cannot be read (a failing disk): a follower starting then, which had read no task, skipped
// every task line it read for good. It waits, with the lines after it, for a pass that reads tasks.json.
func (f *Follower) holdsForTasks(r *runFollower, lacks func() bool) bool {
	if !lacks() {
		return false
	}
	if !r.tasksReread {
		r.tasksReread = true
		f.readTasks(r)
	}
	return r.tasksFailed && lacks()
}

// liveFile reports whether a followed file of kind and name is one pi-crew rotates to archives: events.jsonl, a
// mailbox's inbox.jsonl or outbox.jsonl.
func liveFile(kind fileKind, name string) bool {
	switch kind {
	case eventsFile:
		return name == "events.jsonl"
	case mailboxFile:
		return liveMailboxFile(name)
	}
	return false
}

// planLine plans one line of a followed file, read with the complete lines
// up to read; false holds the line (and the rest of the file) for a later
// pass.
func (f *Follower) planLine(r *runFollower, t *tailState, l line, read int64, replay bool) bool {
	s, p := f.src, r.p
	b := bytes.TrimSpace(l.text)
	if len(b) == 0 {
		return true
	}
	switch t.kind {
	case eventsFile:
		ev, ok := s.parseEvent(r.id, t.rel, l.n, b)
		if !ok {
			return true
		}
		seq := ev.Metadata.Seq
		if r.seqs[seq] {
			return true // the same event in an archive and the live file, or a file read again
		}
		if seq > r.maxSeq+1 && t.rel == s.rel(filepath.Join(r.dir, "events.jsonl")) && r.maxSeq > 0 {
			s.skip(r.id, t.rel, l.n, r.maxSeq+1, "seq %d..%d missing (compacted or a failed append)",
				r.maxSeq+1, seq-1)
		}
		if !replay && f.holdsForTasks(r, func() bool { return lacksTask(p, &ev) }) {
			return false
		}
		r.seqs[seq] = true
		r.maxSeq = max(r.maxSeq, seq)
		p.event(&ev)
	case mailboxFile:
		m, ok := s.parseMessage(r.id, t.rel, l.n, b)
		if !ok {
			return true
		}
		// NB: the inbox of a task the tasks read lack is skipped (inboxOfNoTask), and pi-crew adds a task before it
		// writes to it.
		to := recipient(m)
		if !replay && f.holdsForTasks(r, func() bool { return to != events.RunInbox && p.tasks[to] == nil }) {
			return false
		}
		if s.inboxOfNoTask(r.id, l.n, m, p.tasks[to] != nil) {
			return true
		}
		if first, planned := p.msgs[m.ID]; planned {
			s.messageAgain(r.id, l.n, first, m)
			return true
		}
		if _, steered := p.steerMessages[m.ID]; steered {
			// NB: the message of a steering line given one of its own, read after it: the import of the same files,
			// which plans the mailbox before the steering files, records it, with its delivery states. Left out, the
			// follower dropped it without a line saying so; recorded, its mailbox.appended is the message's second
			// (the steer's stands) and the writes are the import's. Not the steer's message alone: its write may
			// still wait for the daemon, or have been refused, and an import of the same files appends this one.
			s.skip(r.id, t.rel, l.n, 0, "message %s: read after its steering line, which was given a message of its "+
				"own that stands: recorded too, with its delivery states", clip(m.ID))
		}
		p.message(m)
		p.delivery(m.ID, firstOf(p.r.delivery[m.ID], m.Status))
	case steeringFile:
		st, ok := s.parseSteer(r.id, t.rel, t.taskID, l.n, b)
		if !ok {
			return true
		}
		key := st.taskID + "\x00" + st.ID
		if st.ID == "" {
			key += "\x00" + strconv.Itoa(l.n)
		}
		if r.steers[key] {
			return true
		}
		// NB: the steer of a task tasks.json lacks is skipped (steer), and pi-crew adds a task before it steers it.
		if !replay && f.holdsForTasks(r, func() bool { return p.tasks[st.taskID] == nil }) {
			return false
		}
		if st.ID != "" && !p.msgIDs[st.ID] && !replay {
			// pi-crew's broker appends the steer's mailbox message first: a steering line whose message is not read
			// yet waits until each mailbox file of the run has been read to its end in a pass after the one that
			// first read the line, or up to the size it had at the end of that pass (markMailboxes), which finds the
			// message if a file holds it (the import of the finished files pairs them the same way); a legacy line,
			// or one whose message is gone (an archive removed), is then imported with a message of its own. NB: a
			// wait of a time instead (SettleAfter) let a line go before a mailbox read over more passes than that
			// reached its message, which was then left out (planLine of a mailbox line); a wait for the message
			// itself held every later line of the file for as long as the run lived when it was gone; a wait for one
			// pass reading every mailbox file to its end held it for as long as a worker replaced its inbox and
			// outbox in turn, each pass leaving one to the next (waitsForArchive), or appended more to one before
			// every pass than a pass reads of it.
			// Lines read together wait together: from the line before it let through, a file of n lines whose
			// messages never came took n waits. While a file of the run cannot be read (src.failed), a mailbox file
			// may hold the message: the line waits as long as that lasts.
			if t.heldIn == 0 || l.end > t.holdUpTo {
				t.heldIn, t.holdUpTo = r.passes, read
				f.notify(r.id) // the next pass reads the mailbox files again at once, not at the poll
			}
			if t.heldIn == r.passes || r.mailboxesReadIn <= t.heldIn || s.failed {
				return false
			}
		}
		r.steers[key] = true
		p.steer(st)
	}
	return true
}
