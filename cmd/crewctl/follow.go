package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/crewlog/crewlog/migrations/picrew"
)

// unreached is the error of a dial of crewd, its hello included: crewd was not reached with the admin credential.
type unreached struct{ err error }

func (e unreached) Error() string { return e.err.Error() }
func (e unreached) Unwrap() error { return e.err }

// followPicrew runs the pi-crew follower against crewd until ctx ends
// (an interrupt): it is an admin client of the daemon's socket and never
// opens the store.
func (a *app) followPicrew(ctx context.Context, root string) error {
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		return usagef("import picrew: %s is not a directory", root)
	}
	tok, err := a.token()
	if err != nil {
		return err
	}
	sink := picrew.NewDaemonSink(func(ctx context.Context) (picrew.Caller, error) {
		b, err := a.dial(ctx, a.socket, tok)
		if err != nil {
			return nil, unreached{err}
		}
		return b, nil
	})
	defer sink.Close()
	// Reach the daemon once before following, so a wrong socket or token
	// is an error now rather than retries forever.
	if _, err := sink.Checkpoints(ctx); err != nil {
		// NB: a hello crewd refuses (a token not its own) is a wire error too, and crewd not reached, as connect says.
		if isWireError(err) && !errors.As(err, new(unreached)) {
			return brokerErr("import picrew --follow", err)
		}
		return a.unreachedErr("import picrew --follow: ", err)
	}
	var (
		mu       sync.Mutex
		shown    uint64 // events appended, as the last progress line said
		failed   uint64 // calls to crewd that failed, as the last line said
		shownAt  time.Time
		w        = a.io.out
		printOne = func(v any) {
			mu.Lock()
			defer mu.Unlock()
			if a.json {
				b, _ := json.Marshal(v)
				_ = machineLine(w, b)
				return
			}
			screen{w}.printf("%s\n", v)
		}
	)
	f := picrew.NewFollower(root, sink, &picrew.FollowOptions{
		Report: func(s picrew.Skipped) {
			if a.json {
				printOne(map[string]any{"skipped": s})
				return
			}
			printOne("skipped " + s.String())
		},
		OnPass: func(st picrew.FollowStats) {
			// At most a line a second: when calls to crewd failed since the last line (it stopped, or refuses every
			// import.append: the follower keeps the writes and retries, which nothing else would show), else when
			// something was added.
			if time.Since(shownAt) < time.Second {
				return
			}
			switch {
			case st.SendErrors > failed:
				failed, shownAt = st.SendErrors, time.Now()
				if a.json {
					printOne(map[string]any{"failing": st})
					return
				}
				printOne(fmt.Sprintf("crewd at %s did not answer: %d call(s) failed so far; retrying, %d write(s) pending",
					a.socket, st.SendErrors, st.Pending))
			case st.Appended != shown:
				shown, shownAt = st.Appended, time.Now()
				if a.json {
					printOne(map[string]any{"progress": st})
					return
				}
				printOne(fmt.Sprintf("imported %d event(s) in %d write(s); %d already there; %d line(s) read; %d pending",
					st.Appended, st.Writes-st.Replayed, st.Replayed, st.Lines, st.Pending))
			}
		},
	})
	err = f.Run(ctx)
	st := f.Stats()
	if a.json {
		printOne(map[string]any{"stopped": st})
	} else {
		printOne(fmt.Sprintf("stopped: imported %d event(s); %d write(s) already there; %d refused; "+
			"%d problem(s) reported; %d checkpoint(s); %d call(s) to crewd failed", st.Appended, st.Replayed, st.Refused,
			st.Reported, st.Checkpoints, st.SendErrors))
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	if err != nil {
		return usagef("%v", err)
	}
	return nil
}
