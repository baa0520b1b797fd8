package picrew

import (
	"context"
	"path/filepath"
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
	done    chan struct{}
}

func (f *Follower) watch(ctx context.Context, runsDir string) *watcher {
	wt := &watcher{f: f, runsDir: runsDir, dirs: map[string]string{}, done: make(chan struct{})}
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
	wt.dirs[runsDir] = ""
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
			wt.mu.Unlock()
			switch {
			case watched && run == "":
				// A run directory appeared or went: the run is its name.
				wt.f.notify("")
				wt.f.notify(filepath.Base(ev.Name))
			case watched:
				wt.f.notify(run)
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
// steering); those that do not exist yet are added by a later pass. It and
// removeRun are called by the follower's pass alone.
func (wt *watcher) addRun(r *runFollower, steering string) {
	if !wt.active() {
		return
	}
	dirs := []string{r.dir, filepath.Join(r.dir, "mailbox"), filepath.Join(r.dir, "mailbox", "tasks"), steering}
	for p := range r.tails {
		if d := filepath.Dir(p); strings.HasPrefix(d, filepath.Join(r.dir, "mailbox", "tasks")) {
			dirs = append(dirs, d)
		}
	}
	if ents, err := filepath.Glob(filepath.Join(r.dir, "mailbox", "tasks", "*")); err == nil {
		dirs = append(dirs, ents...)
	}
	for _, d := range dirs {
		wt.mu.Lock()
		_, ok := wt.dirs[d]
		wt.mu.Unlock()
		// NB: fsnotify is called without wt.mu: its reader may send on Errors while it holds its own lock (a watch
		// it fails to drop), which Add waits for, and the loop that would take that error waits for wt.mu.
		if !ok && wt.w.Add(d) == nil {
			wt.mu.Lock()
			wt.dirs[d] = r.id
			wt.mu.Unlock()
		}
	}
}

// removeRun stops watching the directories of run id, gone: the watches of those removed with it are gone already,
// and a directory left behind (its steering directory, say) would hold one of the user's inotify watches for good.
// Kept, the entries grew with every run ever followed.
func (wt *watcher) removeRun(id string) {
	if !wt.active() {
		return
	}
	var gone []string
	wt.mu.Lock()
	for d, run := range wt.dirs {
		if run == id {
			gone = append(gone, d)
			delete(wt.dirs, d)
		}
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
