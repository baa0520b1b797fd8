package integration

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// jobWorkers is how many crews drive a job each in the jobs' kill -9 test.
const jobWorkers = 16

var jobKillGrant = []any{map[string]any{
	"name": "read", "label": "Read", "description": "read a file", "parameters": map[string]any{"type": "object"},
	"annotations": map[string]any{"readOnlyHint": true}, "callable": "mgr:read",
	"sourceInfo": map[string]any{"path": "/t/read", "source": "pi", "scope": "user", "origin": "package"},
}}

// TestJobsKillNine: crews drive dispatcher jobs — the manager creates a job and opens its lease, the worker asks
// for proxied calls, the manager revalidates and completes them, pauses and continues the job, and the worker
// replays an old request id — every command with a commandId, while crewd is SIGKILLed at random moments and
// restarted (the harness of TestKillNineTorture). Afterwards: every acknowledged command, retried, gets the same
// answer (job.create's nonce included); every replayed request id was refused; and the log, read back, keeps the
// rules: at most one active lease per job, no request id admitted twice, no result delivered outside the lease
// that admitted its call, in flight within the limit; the state rebuilt from position 1 equals the daemon's
// snapshot plus tail.
func TestJobsKillNine(t *testing.T) {
	rounds := max(4, tortureRounds(t)/2)
	ctx := testContext(t, 10*time.Minute)
	d := newDaemon(t)
	t.Cleanup(d.cleanup)
	d.start()
	crews := make([]*crew, jobWorkers)
	for i := range crews {
		crews[i] = newCrew(ctx, t, d, "W")
	}
	gens := newGenerations()
	var (
		log     = newAckLog()
		record  = log.record
		stop    atomic.Bool
		replays atomic.Int64
		wg      sync.WaitGroup
		failed  = make(chan error, jobWorkers)
	)
	for i, crew := range crews {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &session{d: d, gens: gens, as: crew.workers["W"]}
			o := &session{d: d, gens: gens, as: crew.orch}
			defer w.close()
			defer o.close()
			call := func(s *session, method string, p map[string]any) (ack, bool) {
				a, err := s.call(ctx, method, p)
				if err != nil {
					failed <- err
					return a, false
				}
				record(a)
				return a, true
			}
			a, ok := call(o, "job.create", map[string]any{"jobId": "J", "taskId": "W", "tools": jobKillGrant, "commandId": fmt.Sprintf("jc-%d", i)})
			if !ok {
				return
			}
			var created struct {
				Nonce string `json:"nonce"`
			}
			if a.err != nil || json.Unmarshal(a.result, &created) != nil || created.Nonce == "" {
				failed <- fmt.Errorf("job.create: %s %v", a.result, a.err)
				return
			}
			nonce := created.Nonce
			if _, ok := call(o, "lease.open", map[string]any{"jobId": "J", "mode": "start", "rootToolCallId": "root-0", "commandId": fmt.Sprintf("lo-%d-0", i)}); !ok {
				return
			}
			for n := 0; !stop.Load(); n++ {
				id := fmt.Sprintf("%d-%d", i, n)
				a, ok := call(w, "proxy.request", map[string]any{"jobId": "J", "requestId": fmt.Sprintf("r%d", n), "nonce": nonce,
					"tool": "read", "args": map[string]any{"n": n}, "commandId": "pr-" + id})
				if !ok {
					return
				}
				if a.err != nil {
					failed <- fmt.Errorf("proxy.request %s refused: %v", id, a.err)
					return
				}
				if _, ok := call(o, "manifest.revalidate", map[string]any{"jobId": "J", "requestId": fmt.Sprintf("r%d", n), "tools": jobKillGrant, "commandId": "mv-" + id}); !ok {
					return
				}
				if _, ok := call(o, "proxy.complete", map[string]any{"jobId": "J", "requestId": fmt.Sprintf("r%d", n), "nonce": nonce,
					"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": id}}}, "commandId": "pc-" + id}); !ok {
					return
				}
				if n%5 == 4 {
					a, ok := call(w, "proxy.request", map[string]any{"jobId": "J", "requestId": "r0", "nonce": nonce, "tool": "read", "commandId": "rp-" + id})
					if !ok {
						return
					}
					if a.err == nil {
						failed <- fmt.Errorf("replayed request id r0 was admitted (%s)", id)
						return
					}
					replays.Add(1)
				}
				if n%7 == 6 {
					if _, ok := call(o, "job.transition", map[string]any{"jobId": "J", "to": "paused", "commandId": "jp-" + id}); !ok {
						return
					}
					if a, ok := call(o, "lease.open", map[string]any{"jobId": "J", "mode": "continue", "rootToolCallId": "root-" + id,
						"tools": jobKillGrant, "commandId": "lc-" + id}); !ok || a.err != nil {
						if ok {
							failed <- fmt.Errorf("continue %s refused: %v", id, a.err)
						}
						return
					}
				}
			}
		}()
	}
	start := time.Now()
	for round := range rounds {
		log.awaitProgress(ctx, t, failed, round, jobWorkers)
		<-time.After(time.Duration(rand.IntN(20)) * time.Millisecond) // the kill moment, not a synchronisation
		gens.down()
		d.kill()
		d.start()
		gens.up()
	}
	stop.Store(true)
	wg.Wait()
	close(failed)
	for err := range failed {
		require.NoError(t, err)
	}
	acks := log.acks
	t.Logf("%d rounds, %d acknowledged job commands, %d answers lost to a kill and retried, %d replays refused, in %v",
		rounds, len(acks), gens.lost.Load(), replays.Load(), time.Since(start).Round(time.Millisecond))
	require.Positive(t, gens.lost.Load(), "no command was in flight at any kill")
	require.Positive(t, replays.Load())

	checkReplays(ctx, t, d, acks)
	d.stop()
	checkJobLog(t, d)
}

// checkJobLog reads the stopped daemon's store back and checks the dispatcher's rules on the log itself, then
// that a fold from position 1 answers as the snapshot plus the tail.
func checkJobLog(t *testing.T, d *daemon) {
	l, err := eventlog.Open(filepath.Join(d.data, "store"), &eventlog.Options{ReadOnly: true})
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Verify(nil)
	require.NoError(t, err)
	type lease struct {
		active  bool
		gen     int64
		running bool
	}
	leases := map[string]*lease{}
	admitted := map[string]int64{} // run/job/request → the lease that admitted it
	delivered := map[string]bool{}
	inFlight := map[string]int{}
	it := l.Read(1)
	for it.Next() {
		ev, err := projections.FromLog(it.Event())
		require.NoError(t, err)
		key := func(job string) string { return ev.Stream + "/" + job }
		get := func(job string) *lease {
			if leases[key(job)] == nil {
				leases[key(job)] = &lease{}
			}
			return leases[key(job)]
		}
		switch p := ev.Payload.(type) {
		case *events.LeaseOpened:
			ls := get(p.JobID)
			require.False(t, ls.active, "a second active lease on %s at %d", key(p.JobID), ev.Position)
			ls.active, ls.gen = true, p.Generation
		case *events.LeaseCleared:
			get(p.JobID).active = false
			inFlight[key(p.JobID)] = 0
		case *events.JobStatusChanged:
			get(p.JobID).running = p.To == events.JobRunning
		case *events.ProxyRequested:
			ls := get(p.JobID)
			require.True(t, ls.active && ls.running && ls.gen == p.Generation, "admitted outside an active lease at %d", ev.Position)
			k := key(p.JobID) + "/" + p.RequestID
			_, twice := admitted[k]
			require.False(t, twice, "request %s admitted twice", k)
			admitted[k] = p.Generation
			inFlight[key(p.JobID)]++
			require.LessOrEqual(t, inFlight[key(p.JobID)], projections.DefaultProxyMaxInFlight)
		case *events.ProxyCompleted:
			if p.Fenced {
				continue
			}
			ls := get(p.JobID)
			k := key(p.JobID) + "/" + p.RequestID
			require.True(t, ls.active && ls.running && admitted[k] == ls.gen, "result of %s delivered outside its lease", k)
			require.False(t, delivered[k], "result of %s delivered twice", k)
			delivered[k] = true
			inFlight[key(p.JobID)]--
		case *events.ProxyCancelled:
			inFlight[key(p.JobID)]--
		}
	}
	require.NoError(t, it.Err())
	require.NoError(t, it.Close())
	require.NotEmpty(t, delivered)

	full := projections.New()
	require.NoError(t, projections.Replay(full, l, 0))
	snapped, _, err := projections.Load(l)
	require.NoError(t, err)
	a, err := full.Whole()
	require.NoError(t, err)
	b, err := snapped.Whole()
	require.NoError(t, err)
	for _, run := range runIDs(t, a) {
		require.Equal(t, a.Jobs(run), b.Jobs(run), "jobs of %s: rebuilt from the log = snapshot + tail", run)
		require.Equal(t, a.RevokedRootsOf(run), b.RevokedRootsOf(run))
	}
}

func runIDs(t *testing.T, s *projections.State) []string {
	page, err := s.Runs(projections.RunFilter{Limit: 1000})
	require.NoError(t, err)
	var ids []string
	for _, r := range page.Runs {
		ids = append(ids, r.RunID)
	}
	return ids
}
