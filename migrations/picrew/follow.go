package picrew

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/crewlog/crewlog/events"
)

// Sink is the running daemon as a Follower sees it: the import methods of
// its socket (import.append, import.checkpoints), called with the admin
// credential. The follower never opens the store.
type Sink interface {
	// Import submits ws in order and answers each (same order). An error
	// means the answers are unknown (the connection was lost, say): the
	// follower sends the same writes again, and their command ids make a
	// write that was recorded answer Replayed instead of appending twice.
	Import(ctx context.Context, ws []Write) ([]WriteResult, error)
	// Checkpoints returns the newest checkpoint of every pi-crew file the
	// log holds.
	Checkpoints(ctx context.Context) ([]events.ImportCheckpoint, error)
}

// Write is one import command: the command id naming the source record,
// the run (or events.ImportStream for a checkpoint) and its events.
type Write struct {
	ID    string
	RunID string
	Items []Item
}

// WriteResult is the daemon's answer to one Write: appended (Replayed when
// an earlier attempt recorded it), or refused with a wire code and message.
type WriteResult struct {
	Appended int
	Replayed bool
	Code     string
	Message  string
}

// DefaultCheckpointEvery is FollowOptions.CheckpointEvery's default. A
// checkpoint is an event the log keeps for good, with its outcome (about
// 540 bytes on disk), so a file written all the time costs that every
// interval: 47 MB a day at one second, 4.7 MB at ten. What a longer interval
// costs is re-reading: a follower that crashed reads again at most the lines
// of its last ten seconds, each answered from its recorded outcome; one that
// stops cleanly writes every checkpoint first.
const DefaultCheckpointEvery = 10 * time.Second

// FollowOptions tune a Follower; nil means defaults.
type FollowOptions struct {
	// Poll is how often every run is looked at even without a notification
	// (default 1 s; 250 ms when notifications are unavailable or off).
	Poll time.Duration
	// NoNotify turns filesystem notifications off (polling only).
	NoNotify bool
	// SettleAfter is how long a run whose manifest shows it finished must
	// stay unchanged before it is reconciled with its files, and how long a
	// partial last line must stay as it is, in a file that does not grow,
	// before it is reported (default 2 s).
	SettleAfter time.Duration
	// CheckpointEvery bounds how often a file's checkpoint is written
	// (default DefaultCheckpointEvery): checkpoints save re-reading, the
	// command ids carry exactly-once, so they need not follow every line.
	CheckpointEvery time.Duration
	// MaxBatchBytes bounds the encoded size of the writes one
	// import.append carries (default DefaultMaxBatchBytes). It must stay
	// under the frame cap of the connection to the daemon, less the room
	// the request's envelope takes: the broker client refuses a larger
	// request whole. A write larger than it alone is never sent: it is
	// reported and counted as refused.
	MaxBatchBytes int
	// Report is told of every problem (corrupt line, rotated file, run
	// directory deleted, refused write …), each once.
	Report func(Skipped)
	// Logger (default discard).
	Logger *slog.Logger
	// OnPass, when set, is called after every pass with the counters (and
	// after every failed attempt to read the checkpoints at start).
	OnPass func(FollowStats)
	// now is the clock CheckpointEvery and SettleAfter are measured by
	// (time.Now): tests set one that moves only when told.
	now func() time.Time
	// synced, when set, is told of each run a pass has looked at (tests).
	synced func(run string)
}

// FollowStats counts a Follower's work since it started.
type FollowStats struct {
	Passes      uint64 `json:"passes"`
	Lines       uint64 `json:"lines"`       // JSONL lines read and imported
	Reread      uint64 `json:"reread"`      // lines read again at start to rebuild a live run's state (not sent)
	Writes      uint64 `json:"writes"`      // writes answered by the daemon
	Appended    uint64 `json:"appended"`    // events appended
	Replayed    uint64 `json:"replayed"`    // writes already recorded
	Refused     uint64 `json:"refused"`     // writes the daemon refused (reported)
	Checkpoints uint64 `json:"checkpoints"` // checkpoints written
	Reported    uint64 `json:"reported"`    // problems reported
	Pending     int    `json:"pending"`     // writes waiting for the daemon
	SendErrors  uint64 `json:"sendErrors"`  // failed calls to the daemon (retried)
	// Settled is set after a pass that looked at every file, read nothing
	// new and left nothing to read (a run stopped at maxPending), send,
	// reconcile or checkpoint: the log holds what the files said when the
	// pass began.
	Settled bool `json:"settled"`
}

// Follower keeps importing a pi-crew crew root as pi-crew writes it: new
// runs, new lines of events.jsonl, mailbox and steering files, and
// rewrites of manifest.json, tasks.json and delivery.json. See follow in
// the package doc for its guarantees.
//
// Concurrency: Run is called once; Stats may be called from any goroutine.
type Follower struct {
	root string
	sink Sink
	o    FollowOptions
	src  *source

	runs map[string]*runFollower
	cks  map[string]events.ImportCheckpoint // by relative path, as loaded at start
	// cksOfRun holds the paths of cks by the run whose files they are (checkpointRun): remember keeps it.
	cksOfRun runIndex
	reported reportedOnce
	lastCkpt time.Time
	// fullPasses counts the passes that looked at every run.
	fullPasses uint64
	// listWork counts the files and tails followedFiles looked at, over every pass: tests hold it linear in a run's
	// files (up to 3 × maxRunFiles + 1 a pass).
	listWork uint64
	// goneWork counts the checkpoints and directories watched (or lost) gone looked at, over every pass: tests hold it linear
	// in those of the runs removed.
	goneWork uint64

	mu    sync.Mutex
	stats FollowStats
	dirty map[string]bool // runs a notification named since the last pass
	kick  chan struct{}

	watcher *watcher // Run's, once it watches: tests read what it holds after Run returns
}

// NewFollower returns a follower of the crew root root that imports into
// sink.
func NewFollower(root string, sink Sink, opts *FollowOptions) *Follower {
	var o FollowOptions
	if opts != nil {
		o = *opts
	}
	if o.SettleAfter <= 0 {
		o.SettleAfter = 2 * time.Second
	}
	if o.CheckpointEvery <= 0 {
		o.CheckpointEvery = DefaultCheckpointEvery
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if o.now == nil {
		o.now = time.Now
	}
	return &Follower{root: root, sink: sink, o: o, src: &source{root: root}, runs: map[string]*runFollower{},
		dirty: map[string]bool{}, kick: make(chan struct{}, 1)}
}

// Stats returns the counters.
func (f *Follower) Stats() FollowStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

func (f *Follower) count(fn func(*FollowStats)) {
	f.mu.Lock()
	fn(&f.stats)
	f.mu.Unlock()
}

// dormantEvery is how many full passes go by between two looks at a
// finished run nothing notified about.
const dormantEvery = 10

// maxReported bounds the set that keeps each report to once (reportedOnce).
const maxReported = 100_000

// report passes what the source skipped to Options.Report, each once.
func (f *Follower) report() {
	for _, s := range f.src.skipped {
		k := s.String()
		if s.Reason == tempReason || f.reported.seen(k) {
			// A temporary file is gone a moment later: while following,
			// it is not worth a line.
			continue
		}
		f.count(func(st *FollowStats) { st.Reported++ })
		f.o.Logger.Warn("picrew follow: " + k)
		if f.o.Report != nil {
			f.o.Report(s)
		}
	}
	f.src.skipped = f.src.skipped[:0]
	clear(f.src.perFile)
}

// Run follows the root until ctx ends. It loads the checkpoints, imports
// what is new since them, then keeps importing at every notification and
// poll. A daemon that cannot be reached is retried at every poll; nothing
// pi-crew wrote in the meantime is lost (the files are read again from the
// last acknowledged position). A pass that ctx's end meets stops at the
// next run: what it read is sent, and the runs it did not look at are read
// at the next start, from their checkpoints. Run returns ctx's end, after a
// last attempt to record the checkpoints; an error only when the root is
// not a crew root.
func (f *Follower) Run(ctx context.Context) error {
	runsDir := filepath.Join(f.root, "state", "runs")
	// NB: listed as every pass lists it (crewRoot), not looked at with os.Stat, which follows a link out of the root
	// that every pass would then refuse to list, reporting the runs unreadable for good.
	if _, err := readDir(f.src.files(), runsDir); err != nil {
		return fmt.Errorf("picrew: %s is not a pi-crew crew root (no state/runs directory): %w", f.root,
			pathless(err))
	}
	for f.cks == nil {
		cks, err := f.sink.Checkpoints(ctx)
		if err == nil {
			f.cks = make(map[string]events.ImportCheckpoint, len(cks))
			for _, c := range cks {
				if err := c.Validate(); err != nil {
					// NB: a daemon neither records nor answers one (events.DecodePayload); from another, the file
					// is read again from the start rather than from a position that cannot be.
					f.src.skip("", clip(c.Path), 0, 0, "checkpoint refused (%v): read again from the start (the "+
						"command ids keep it from doubling)", err)
					continue
				}
				f.remember(c) // a gone one is read as none: not kept
			}
			break
		}
		f.count(func(st *FollowStats) { st.SendErrors++ })
		f.o.Logger.Warn("picrew follow: reading the checkpoints failed; retrying", "err", err)
		if f.o.OnPass != nil {
			f.o.OnPass(f.Stats())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(f.poll(false)):
		}
	}
	defer f.src.files().close()
	w := f.watch(ctx, runsDir)
	defer w.close()
	f.watcher = w
	tick := time.NewTicker(f.poll(w.active()))
	defer tick.Stop()
	all := true
	for {
		f.pass(ctx, runsDir, all, w)
		select {
		case <-ctx.Done():
			// The writes read so far and a last checkpoint, with a context
			// of their own: ctx has ended.
			fin, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			f.flush(fin)
			f.flushCheckpoints(fin, true)
			f.report()
			cancel()
			return ctx.Err()
		case <-tick.C:
			all = true
		case <-f.kick:
			all = false
		}
	}
}

func (f *Follower) poll(notified bool) time.Duration {
	switch {
	case f.o.Poll > 0:
		return f.o.Poll
	case notified:
		return time.Second
	}
	return 250 * time.Millisecond
}

// notify marks a run for the next pass and wakes the loop.
func (f *Follower) notify(run string) {
	f.mu.Lock()
	f.dirty[run] = true
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// pass looks at every run (all) or those a notification named, imports
// what changed, and writes the checkpoints that are due.
func (f *Follower) pass(ctx context.Context, runsDir string, all bool, w *watcher) {
	// NB: the directories a pass holds (crewRoot.held) are let go at its end, so the next pass opens them again and
	// meets a link put in place of one since.
	f.src.files().release()
	defer f.src.files().release()
	f.mu.Lock()
	dirty := f.dirty
	f.dirty = map[string]bool{}
	linesBefore := f.stats.Lines
	f.mu.Unlock()
	if all || dirty[""] {
		f.scanRuns(runsDir, w)
	}
	if all {
		f.fullPasses++
	}
	// A finished run at rest is looked at without a notification only
	// every dormantEvery full passes: a root with many finished runs costs a
	// stat of each of their files every ten seconds, not every one (every
	// 2.5 s, not four times a second, polling without notifications, where
	// a change to one is seen that much later).
	skipDormant := f.fullPasses%dormantEvery != 1
	for id, r := range f.runs {
		if r.dormant && skipDormant && !dirty[id] {
			continue
		}
		if ctx.Err() != nil {
			// NB: a stop ends the pass here, not after every run of a large root was read: what was read is sent by
			// Run's last flush, and the runs not looked at are read at the next start, from their checkpoints.
			break
		}
		if all || dirty[id] || len(r.pending) > 0 {
			f.syncRun(r, w)
			if f.o.synced != nil {
				f.o.synced(id)
			}
		}
	}
	if ctx.Err() != nil {
		return
	}
	f.report()
	f.flush(ctx)
	f.flushCheckpoints(ctx, false)
	f.report()
	for _, r := range f.runs {
		f.maybeSleep(r)
	}
	settled := true
	for _, r := range f.runs {
		if len(r.pending) > 0 || r.unread || r.anyDirty() || r.holding() ||
			(r.p != nil && terminalRun(r.p.r.manifest.Status) && r.reconciled != r.p.r.manifest.Status) {
			settled = false
		}
	}
	f.count(func(st *FollowStats) {
		st.Passes++
		st.Pending = 0
		for _, r := range f.runs {
			st.Pending += len(r.pending)
		}
		// Only a pass that looked at every file can tell nothing is left:
		// a notification may still be on its way.
		st.Settled = all && settled && st.Lines == linesBefore
	})
	if f.o.OnPass != nil {
		f.o.OnPass(f.Stats())
	}
}

// scanRuns finds new run directories and those pi-crew's retention
// removed.
func (f *Follower) scanRuns(runsDir string, w *watcher) {
	entries, err := readDir(f.src.files(), runsDir)
	if err != nil {
		f.src.skip("", "state/runs", 0, 0, "unreadable: %v (retrying)", err)
		return
	}
	seen := map[string]bool{}
	for _, e := range entries {
		p := filepath.Join(runsDir, e.Name())
		switch {
		case !e.IsDir():
			f.src.skip("", f.src.rel(p), 0, 0, "%s", classify(e.Name(), "not a run directory"))
		case !runIDPattern.MatchString(e.Name()):
			f.src.skip("", f.src.rel(p), 0, 0, "directory name is not a pi-crew run id")
		default:
			seen[e.Name()] = true
			if f.runs[e.Name()] == nil {
				f.runs[e.Name()] = newRunFollower(e.Name(), p)
			}
		}
	}
	for id, r := range f.runs {
		if !seen[id] {
			f.gone(r, w)
		}
	}
}

// gone handles a run directory that disappeared (pi-crew's retention, or a
// user): what was imported stays, and its files' checkpoints are marked
// gone once every pending write is answered.
func (f *Follower) gone(r *runFollower, w *watcher) {
	w.removeRun(r.id)
	f.src.skip(r.id, f.src.rel(r.dir), 0, 0,
		"run directory removed (pi-crew's retention?): what was imported stays; no longer followed")
	r.gone = true
	// Files not followed now (a dormant run's, or removed before they were
	// listed) are known by their checkpoints.
	known := map[string]bool{}
	for _, t := range r.tails {
		known[t.rel] = true
	}
	for _, w := range r.whole {
		known[w.rel] = true
	}
	// NB: the run's checkpoints alone (cksOfRun): those of its directory and its steering directory.
	for path := range f.cksOfRun[r.id] {
		f.goneWork++
		if c := f.cks[path]; !c.Gone && !known[path] {
			r.tails[path] = &tailState{tail: tail{rel: c.Path, inode: c.Inode, size: c.Size, offset: c.Offset,
				lines: c.Lines, hash: c.LastLineHash}}
		}
	}
	for _, t := range r.tails {
		t.dirty = true
	}
	for _, w := range r.whole {
		w.dirty = true
	}
}

// ckID is the command id of a checkpoint: the file, its identity and the
// position, so the same checkpoint written twice is recorded once.
func ckID(c events.ImportCheckpoint) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d\x00%d\x00%s\x00%d\x00%t\x00%t", c.Path, c.Inode,
		c.Size, c.Offset, c.LastLineHash, c.Lines, c.Gone, c.Reconciled))
	return "import:picrew:checkpoint:" + hex.EncodeToString(h[:16])
}

// flushCheckpoints records the checkpoint of every file read further since
// its last one, for runs whose writes are all answered (a checkpoint never
// covers a write the daemon has not recorded). It writes at most every
// CheckpointEvery unless force.
func (f *Follower) flushCheckpoints(ctx context.Context, force bool) {
	if !force && f.o.now().Sub(f.lastCkpt) < f.o.CheckpointEvery {
		return
	}
	var ws []Write
	var done []func()
	var cks []events.ImportCheckpoint
	add := func(c events.ImportCheckpoint, clean func()) {
		ws = append(ws, Write{ID: ckID(c), RunID: events.ImportStream,
			Items: []Item{{Type: events.TypeImportCheckpoint, Payload: &c}}})
		done = append(done, clean)
		cks = append(cks, c)
	}
	for _, r := range f.runs {
		if len(r.pending) > 0 {
			continue
		}
		for _, t := range r.tails {
			if t.dirty {
				c := t.checkpoint()
				c.Gone = r.gone || t.gone
				add(c, func() { t.dirty = false })
			}
		}
		for _, w := range r.whole {
			if w.dirty {
				c := w.checkpoint()
				c.Gone = r.gone
				add(c, func() { w.dirty = false })
			}
		}
	}
	f.lastCkpt = f.o.now()
	// A checkpoint is a few hundred bytes, but its path is pi-crew's, so
	// the batches are bounded by bytes as the runs' writes are.
	sizes := make([]int, len(ws))
	for i := 0; i < len(ws); {
		n, big := f.batchLen(ws[i:], sizes[i:])
		if big != nil {
			done[i]()
			f.src.skip("", cks[i].Path, 0, 0, "checkpoint not recorded: %v", big)
			i++
			continue
		}
		j := i + n
		res, err := f.sink.Import(ctx, ws[i:j])
		if err != nil || len(res) != n {
			f.count(func(st *FollowStats) { st.SendErrors++ })
			return
		}
		for k, rs := range res {
			done[i+k]()
			if rs.Code != "" {
				// Not retried: the same checkpoint would be refused again.
				f.src.skip("", cks[i+k].Path, 0, 0, "checkpoint refused (%s): %s", rs.Code, rs.Message)
				continue
			}
			f.remember(cks[i+k])
			f.count(func(st *FollowStats) { st.Checkpoints++ })
		}
		i = j
	}
	for id, r := range f.runs {
		if r.gone && len(r.pending) == 0 && !r.anyDirty() {
			delete(f.runs, id)
		}
	}
}

// remember keeps c, the checkpoint just recorded of its file, for the rest of the follow, and forgets a gone file's:
// the follower reads a gone checkpoint as none (the file is read from its start if it comes back), and pi-crew's
// retention removes every run in turn, so kept, the gone ones grew with every file of every run ever followed.
func (f *Follower) remember(c events.ImportCheckpoint) {
	run, ofRun := checkpointRun(c.Path)
	if c.Gone {
		delete(f.cks, c.Path)
		if ofRun {
			f.cksOfRun.remove(run, c.Path)
		}
		return
	}
	f.cks[c.Path] = c
	if ofRun {
		f.cksOfRun.add(run, c.Path)
	}
}

// sendBatch is how many writes one import.append carries at most (the
// broker takes up to 256).
const sendBatch = 128

// DefaultMaxBatchBytes is FollowOptions.MaxBatchBytes' default: the batch
// for the broker's default frame cap (wire.DefaultMaxFrame, 256 KiB, which
// the broker client refuses to send a request over).
const DefaultMaxBatchBytes = (256 << 10) / 2

// BatchBytesFor is the FollowOptions.MaxBatchBytes of a follower whose
// daemon's frame cap is maxFrame: half of it, the other half leaving room
// for the request's envelope.
func BatchBytesFor(maxFrame int) int { return maxFrame / 2 }

// batchLen is how many of the writes ws go in the next import.append: at
// most sendBatch, and at most MaxBatchBytes of them encoded, in order.
// sizes holds ws' encoded sizes, measured here where 0. big is not nil
// when ws[0] alone cannot be sent (larger than the budget, or not
// encodable): the caller reports and drops it.
func (f *Follower) batchLen(ws []Write, sizes []int) (n int, big error) {
	total := 0
	for n < len(ws) && n < sendBatch {
		if sizes[n] == 0 {
			sz, err := ws[n].encodedSize()
			if err != nil {
				if n == 0 {
					return 0, fmt.Errorf("cannot be encoded for the daemon: %w", err)
				}
				break
			}
			sizes[n] = sz
		}
		if sizes[n] > f.o.MaxBatchBytes && n == 0 {
			return 0, fmt.Errorf("%d bytes encoded, larger than the daemon takes in one request (%d)", sizes[n],
				f.o.MaxBatchBytes)
		}
		if total+sizes[n] > f.o.MaxBatchBytes {
			break
		}
		total += sizes[n]
		n++
	}
	return n, nil
}

// reusedIDText is the daemon's answer to a command id recorded for another
// request: here, a source record imported from an earlier reading of the
// files whose mapping differed (a shadow's title read before tasks.json
// named it, say). The first import stands.
const reusedIDText = "commandId already used for a different request"

// flush sends every run's pending writes, in order; a failed call keeps
// them for the next pass.
func (f *Follower) flush(ctx context.Context) {
	for _, r := range f.runs {
		for len(r.pending) > 0 {
			m := min(len(r.pending), sendBatch)
			ws := make([]Write, m)
			sizes := make([]int, m)
			for i, p := range r.pending[:m] {
				ws[i] = Write{ID: p.id, RunID: r.id, Items: p.items}
				sizes[i] = p.size
			}
			n, big := f.batchLen(ws, sizes)
			for i, sz := range sizes {
				r.pending[i].size = sz
			}
			if big != nil {
				// Sent, it would fail at every pass and hold back the
				// run's later writes.
				f.count(func(st *FollowStats) { st.Refused++ })
				f.src.skip(r.id, f.src.rel(r.dir), 0, 0, "%s not imported: %v", ws[0].ID, big)
				r.pending = r.pending[1:]
				continue
			}
			ws = ws[:n]
			res, err := f.sink.Import(ctx, ws)
			if err != nil || len(res) != n {
				f.count(func(st *FollowStats) { st.SendErrors++ })
				f.o.Logger.Warn("picrew follow: the daemon did not answer; the writes are sent again", "run",
					r.id, "err", err)
				return
			}
			for i, rs := range res {
				f.count(func(st *FollowStats) {
					st.Writes++
					st.Appended += uint64(rs.Appended)
					if rs.Replayed {
						st.Replayed++
					}
				})
				switch {
				case rs.Code == "":
				case strings.Contains(rs.Message, reusedIDText):
					f.src.skip(r.id, f.src.rel(r.dir), 0, 0,
						"%s: imported earlier from another reading of the files; the first import stands", ws[i].ID)
				default:
					f.count(func(st *FollowStats) { st.Refused++ })
					f.src.skip(r.id, f.src.rel(r.dir), 0, 0, "%s refused by the daemon (%s): %s", ws[i].ID,
						rs.Code, rs.Message)
				}
			}
			r.pending = r.pending[n:]
		}
		r.pending = nil
	}
}
