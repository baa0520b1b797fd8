package picrew

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// watcher turns filesystem notifications into runs to look at. When
// notifications are unavailable (no inotify, a limit reached, NoNotify),
// it is inactive and the follower polls.
type watcher struct {
	f       *Follower
	w       *fsnotify.Watcher
	runsDir string
	mu      sync.Mutex
	dirs    map[string]string // watched directory → run ("" for state/runs)
	// tasks counts each run's task mailboxes watched (maxTaskWatches). NB: kept, not counted in dirs, which holds
	// every run's directories: addRun is called for every run a pass syncs.
	tasks map[string]int
	// lost are the directories watched (dirs: directory → run) whose watch a notification said is gone or names
	// another directory now: removed, renamed away, or replaced under their name (dropLost).
	lost map[string]string
	// dirsOfRun and lostOfRun hold the directories of dirs and lost by their run (runIndex.set keeps them; wt.mu
	// guards them): what one run has watched is found without a look at every run's (removeRun, dropLost).
	dirsOfRun, lostOfRun runIndex
	done                 chan struct{}
}

func (f *Follower) watch(ctx context.Context, runsDir string) *watcher {
	wt := &watcher{f: f, runsDir: runsDir, dirs: map[string]string{}, tasks: map[string]int{},
		lost: map[string]string{}, done: make(chan struct{})}
	if f.o.NoNotify {
		close(wt.done)
		return wt
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		f.o.Logger.Warn("picrew follow: no filesystem notifications; polling", "err", err)
		close(wt.done)
		return wt
	}
	if err := w.Add(runsDir); err != nil {
		f.o.Logger.Warn("picrew follow: cannot watch the runs directory; polling", "err", err)
		w.Close()
		close(wt.done)
		return wt
	}
	wt.w = w
	wt.dirsOfRun.set(wt.dirs, runsDir, "")
	go wt.loop(ctx)
	return wt
}

func (wt *watcher) active() bool { return wt != nil && wt.w != nil }

func (wt *watcher) loop(ctx context.Context) {
	defer close(wt.done)
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-wt.w.Events:
			if !ok {
				return
			}
			wt.mu.Lock()
			run, watched := wt.dirs[filepath.Dir(ev.Name)]
			self, isDir := wt.dirs[ev.Name]
			if isDir && self != "" && ev.Has(fsnotify.Create|fsnotify.Remove|fsnotify.Rename) {
				// NB: a directory watched that went (its watch went with it), was renamed away (fsnotify drops the
				// watch) or was replaced under its name (renamed over): the directory now there is not watched, and
				// kept in dirs it never was again (addRun adds what dirs lacks), its files' changes woke nothing.
				wt.lostOfRun.set(wt.lost, ev.Name, self)
			}
			wt.mu.Unlock()
			switch {
			case watched && run == "":
				// A run directory appeared or went: the run is its name.
				wt.f.notify("")
				wt.f.notify(filepath.Base(ev.Name))
			case watched:
				wt.f.notify(run)
			case isDir && self != "":
				wt.f.notify(self) // a directory whose parent is not watched (the steering directory)
			}
		case _, ok := <-wt.w.Errors:
			if !ok {
				return
			}
			// An overflow lost notifications: look at everything.
			wt.f.notify("")
		}
	}
}

// addRun watches a run's directories (run, mailbox, task mailboxes,
// steering), none through a symbolic link; those that do not exist yet are
// added by a later pass, and those a notification said were lost are
// watched again under their names (dropLost). It and removeRun are called
// by the follower's pass alone.
func (wt *watcher) addRun(r *runFollower, steering string) {
	if !wt.active() {
		return
	}
	tasks := filepath.Join(r.dir, "mailbox", "tasks")
	wt.dropLost(r.id, tasks)
	dirs := []string{r.dir, filepath.Join(r.dir, "mailbox"), tasks, steering}
	// NB: a task's mailbox is watched only when the listing shows a directory named as a task may be (taskNamed: one
	// of a reserved name is not read): a link there may name another run's directory or one outside the crew root,
	// which a watch follows.
	entries, _ := readDir(wt.f.src.files(), tasks)
	for _, e := range entries {
		if e.IsDir() && taskNamed(e.Name()) {
			dirs = append(dirs, filepath.Join(tasks, e.Name()))
		}
	}
	wt.mu.Lock()
	taskWatches := wt.tasks[r.id]
	wt.mu.Unlock()
	for _, d := range dirs {
		task := filepath.Dir(d) == tasks
		wt.mu.Lock()
		_, ok := wt.dirs[d]
		wt.mu.Unlock()
		switch {
		case ok, task && taskWatches >= maxTaskWatches:
			continue
		case !task && wt.f.src.files().realDir(d) != nil:
			// NB: a link in place of the run's directory, its mailbox, mailbox/tasks or its steering directory (a
			// task's mailbox is one the listing showed a directory): a watch follows it, and the link's path would
			// take over the watch of what it names, another run's directory or one outside the crew root.
			continue
		}
		// NB: in dirs before fsnotify watches it, so that the loop takes a notification of its loss (the directory
		// removed as it was watched) for a directory watched: lost, it is dropped at the next pass (dropLost).
		count := func(by int) {
			if task {
				taskWatches += by
				wt.tasks[r.id] = taskWatches
			}
		}
		wt.mu.Lock()
		wt.dirsOfRun.set(wt.dirs, d, r.id)
		count(1)
		wt.mu.Unlock()
		// NB: fsnotify is called without wt.mu: its reader may send on Errors while it holds its own lock (a watch
		// it fails to drop), which Add waits for, and the loop that would take that error waits for wt.mu.
		if wt.w.Add(d) != nil {
			wt.mu.Lock()
			wt.dirsOfRun.unset(wt.dirs, d)
			count(-1)
			wt.mu.Unlock()
		}
	}
}

// dropLost stops watching the directories of run id that a notification said are lost (wt.lost), and those below
// them, so that addRun watches what is there now under their names; tasks is the run's mailbox/tasks, whose
// directories count against maxTaskWatches. NB: fsnotify's watch of each is removed before it leaves dirs: added
// again over a watch fsnotify still holds by that name (a rename it has not yet seen), the new watch took the old's
// place in fsnotify, which lost track of the old one, a watch of the user's held for good. The loop does not do it
// itself: fsnotify may wait for it to take an error while holding the lock Remove waits for.
func (wt *watcher) dropLost(id, tasks string) {
	wt.mu.Lock()
	var lost, gone []string
	for l := range wt.lostOfRun[id] {
		lost = append(lost, l)
	}
	if len(lost) == 0 {
		wt.mu.Unlock()
		return // NB: before going over the run's dirs: addRun asks at every run a pass syncs
	}
	for d := range wt.dirsOfRun[id] {
		if slices.ContainsFunc(lost, func(l string) bool {
			return d == l || strings.HasPrefix(d, l+string(filepath.Separator))
		}) {
			gone = append(gone, d)
		}
	}
	wt.mu.Unlock()
	for _, d := range gone { // NB: without wt.mu, as in addRun
		_ = wt.w.Remove(d) // NB: an error for a watch that went with its directory, or that fsnotify dropped
	}
	wt.mu.Lock()
	defer wt.mu.Unlock()
	for _, l := range lost {
		// NB: only those handled: one the loop added since is another loss, for the next pass.
		wt.lostOfRun.unset(wt.lost, l)
	}
	for _, d := range gone {
		wt.dirsOfRun.unset(wt.dirs, d)
		if filepath.Dir(d) == tasks {
			wt.tasks[id]--
		}
	}
}

// maxTaskWatches bounds the task mailboxes of a run the follower watches. NB: each holds one of the user's inotify
// watches, a limit every run shares with every other program of the user, and a run's workers make as many
// directories as they like; a run of pi-crew has tens of tasks, hundreds with its shadows. The mailboxes past it are
// read at every poll, as without notifications.
const maxTaskWatches = 256

// removeRun stops watching the directories of run id, gone: the watches of those removed with it are gone already,
// and a directory left behind (its steering directory, say) would hold one of the user's inotify watches for good.
// Kept, the entries grew with every run ever followed.
func (wt *watcher) removeRun(id string) {
	if !wt.active() {
		return
	}
	var gone []string
	wt.mu.Lock()
	// NB: the run's own (dirsOfRun, lostOfRun), not every run's.
	for d := range wt.dirsOfRun[id] {
		wt.f.goneWork++
		gone = append(gone, d)
		wt.dirsOfRun.unset(wt.dirs, d)
	}
	delete(wt.tasks, id)
	for l := range wt.lostOfRun[id] {
		wt.f.goneWork++
		wt.lostOfRun.unset(wt.lost, l)
	}
	wt.mu.Unlock()
	for _, d := range gone { // NB: without wt.mu, as in addRun
		_ = wt.w.Remove(d) // NB: an error for a directory whose watch went with it
	}
}

func (wt *watcher) close() {
	if wt.w != nil {
		wt.w.Close()
	}
	<-wt.done
}
