package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/broker/brokertest"
	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/migrations/picrew"
	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// testDaemon is crewd's store, engine and broker in-process, on a data
// directory that outlives it, so a test can stop and start it again.
type testDaemon struct {
	t      *testing.T
	data   string
	socket string
	l      *eventlog.Log
	eng    *commands.Engine
	srv    *broker.Server
	served chan error
}

func startDaemon(t *testing.T, data, socket string) *testDaemon {
	t.Helper()
	key := []byte(strings.Repeat("k", 32))
	require.NoError(t, os.WriteFile(filepath.Join(data, adminTokenFile), []byte(liveToken+"\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(data, serverKeyFile), key, 0o600))
	d := &testDaemon{t: t, data: data, socket: socket, served: make(chan error, 1)}
	var err error
	d.l, err = eventlog.Open(filepath.Join(data, storeDir), nil)
	require.NoError(t, err)
	d.eng, err = commands.Open(d.l, commands.Options{})
	require.NoError(t, err)
	sum := sha256.Sum256([]byte(liveToken))
	d.srv, err = broker.New(d.eng, d.l, broker.Options{SocketPath: socket, AdminDigest: hex.EncodeToString(sum[:]), ServerKey: key})
	require.NoError(t, err)
	require.NoError(t, d.srv.Listen())
	go func() { d.served <- d.srv.Serve(context.Background()) }()
	t.Cleanup(d.stop)
	return d
}

// stop closes the daemon; a second stop does nothing.
func (d *testDaemon) stop() {
	if d.srv == nil {
		return
	}
	d.srv.Close()
	require.NoError(d.t, <-d.served)
	d.eng.Close()
	d.l.Close()
	d.srv = nil
}

// followerRun is a picrew.Follower over the daemon's socket, as crewctl
// import picrew --follow runs it, in the background of a test.
type followerRun struct {
	f      *picrew.Follower
	sink   *picrew.DaemonSink
	cancel context.CancelFunc
	done   chan error
	passes chan picrew.FollowStats
}

func startFollower(t *testing.T, root, socket string, tune ...func(*picrew.FollowOptions)) *followerRun {
	t.Helper()
	fr := &followerRun{done: make(chan error, 1), passes: make(chan picrew.FollowStats, 1)}
	fr.sink = picrew.NewDaemonSink(func(ctx context.Context) (picrew.Caller, error) {
		return dialBroker(ctx, socket, liveToken)
	})
	o := &picrew.FollowOptions{
		Poll: 50 * time.Millisecond, SettleAfter: 300 * time.Millisecond, CheckpointEvery: 100 * time.Millisecond,
		OnPass: func(st picrew.FollowStats) {
			select {
			case <-fr.passes:
			default:
			}
			fr.passes <- st
		},
	}
	for _, f := range tune {
		f(o)
	}
	fr.f = picrew.NewFollower(root, fr.sink, o)
	ctx, cancel := context.WithCancel(context.Background())
	fr.cancel = cancel
	go func() { fr.done <- fr.f.Run(ctx) }()
	t.Cleanup(func() { fr.stop(t) })
	return fr
}

// settle waits for a pass begun after the call that found nothing left.
func (fr *followerRun) settle(t *testing.T) picrew.FollowStats {
	t.Helper()
	after := fr.f.Stats().Passes + 1
	return fr.waitFor(t, func(st picrew.FollowStats) bool { return st.Passes > after && st.Settled })
}

// waitFor waits for a pass whose counters satisfy ok.
func (fr *followerRun) waitFor(t *testing.T, ok func(picrew.FollowStats) bool) picrew.FollowStats {
	t.Helper()
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for {
		select {
		case st := <-fr.passes:
			if ok(st) {
				return st
			}
		case err := <-fr.done:
			require.FailNow(t, "the follower stopped", "%v", err)
		case <-timeout.C:
			require.FailNow(t, "the follower did not settle", "%+v", fr.f.Stats())
		}
	}
}

func (fr *followerRun) stop(t *testing.T) picrew.FollowStats {
	if fr.cancel != nil {
		fr.cancel()
		fr.cancel = nil
		require.ErrorIs(t, <-fr.done, context.Canceled)
		fr.sink.Close()
	}
	return fr.f.Stats()
}

// writesOf reads a closed store: every event of a run's stream by its
// command id (the write it belongs to), as type lists.
func writesOf(t *testing.T, store string) map[string][]string {
	t.Helper()
	l, err := eventlog.Open(store, nil)
	require.NoError(t, err)
	defer l.Close()
	out := map[string][]string{}
	it := l.Read(1)
	defer it.Close()
	for it.Next() {
		ev := it.Event()
		if ev.Stream == events.ImportStream || ev.Stream == events.EngineStream {
			continue
		}
		out[ev.CommandID] = append(out[ev.CommandID], ev.Type)
	}
	require.NoError(t, it.Err())
	return out
}

// oneShot imports root with the one-shot import into a fresh store and
// returns its writes.
func oneShot(t *testing.T, root string) map[string][]string {
	t.Helper()
	store := filepath.Join(t.TempDir(), "store")
	l, err := eventlog.Open(store, nil)
	require.NoError(t, err)
	_, err = picrew.Import(l, root, nil)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	return writesOf(t, store)
}

const (
	followRunA = "team_20261201120000_0000000000000a01"
	followRunB = "team_20261201120000_0000000000000b02"
)

// TestFollowThroughCrewd: a follower imports a crew root that is written
// continuously, through crewd's socket; crewd is restarted under it, and
// the follower itself is stopped (files keep changing) and started again.
// At the end the store holds exactly what a one-shot import of the final
// files writes — every write once, with the same events — and crewctl
// verify passes. CREWLOG_SOAK=1 writes ten times as much.
func TestFollowThroughCrewd(t *testing.T) {
	progress := 40
	if os.Getenv("CREWLOG_SOAK") != "" {
		progress = 400
	}
	data, socket, d, root := followDaemon(t)
	a, err := root.NewRun(followRunA)
	require.NoError(t, err)
	b, err := root.NewRun(followRunB)
	require.NoError(t, err)
	stepsA, stepsB := picrewtest.Lifecycle(a, progress), picrewtest.Lifecycle(b, progress/4)
	fr := startFollower(t, root.Dir, socket)
	n := max(len(stepsA), len(stepsB))
	restartDaemonAt, restartFollowerAt := n/3, 2*n/3
	for i := range n {
		if i < len(stepsA) {
			require.NoError(t, stepsA[i]())
		}
		if i < len(stepsB) {
			require.NoError(t, stepsB[i]())
		}
		switch i {
		case restartDaemonAt:
			d.stop() // files keep changing while crewd is down
		case restartDaemonAt + 3:
			// The follower met the daemon down: its writes wait.
			errs := fr.f.Stats().SendErrors
			fr.waitFor(t, func(st picrew.FollowStats) bool { return st.SendErrors > errs })
			d = startDaemon(t, data, socket)
		case restartFollowerAt:
			fr.stop(t)
		case restartFollowerAt + 3:
			fr = startFollower(t, root.Dir, socket)
		}
	}
	st := fr.settle(t)
	require.Zero(t, st.Refused, "%+v", st)
	// The restarted follower resumed from the checkpoints: it sent again
	// only run.created and the workflow tasks of the two runs, read again
	// only what rebuilds their state, and imported the rest once.
	require.LessOrEqual(t, st.Replayed, uint64(6), "%+v", st)
	require.Positive(t, st.Appended)
	fr.stop(t)
	d.stop()

	got, want := writesOf(t, filepath.Join(data, storeDir)), oneShot(t, root.Dir)
	var missing, extra []string
	for _, id := range keys(want) {
		if _, ok := got[id]; !ok {
			missing = append(missing, id)
		}
	}
	for _, id := range keys(got) {
		if _, ok := want[id]; !ok {
			extra = append(extra, id)
		}
	}
	require.Empty(t, missing, "writes of the one-shot import the follower did not make")
	require.Empty(t, extra, "writes the follower made that the one-shot import does not")
	for id, types := range want {
		require.Equal(t, types, got[id], "write %s", id)
	}
	r := crewctl(t, nil, "verify", "--data", data)
	require.Equal(t, exitOK, r.code, "%s%s", r.out, r.err)
}

func keys(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestFollowLatency measures how long a line pi-crew appends takes to be
// visible to a subscriber of crewd (from the write to the event's arrival),
// with filesystem notifications and with polling only (the fallback, every
// 250 ms), and logs p50 and p99. It asserts nothing about time (a shared
// machine says little about the follower): only that every line arrives,
// once and in order. CREWLOG_SOAK=1 measures thirty times as many: 1,800 lines (240 polling).
//
//	go test ./cmd/crewctl -run TestFollowLatency -v
func TestFollowLatency(t *testing.T) {
	for _, c := range []struct {
		name  string
		lines int
		tune  func(*picrew.FollowOptions)
	}{
		{"notify", 60, func(*picrew.FollowOptions) {}},
		{"poll", 8, func(o *picrew.FollowOptions) { o.NoNotify, o.Poll = true, 0 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			lines := c.lines
			if os.Getenv("CREWLOG_SOAK") != "" {
				lines *= 30
			}
			measureFollow(t, lines, c.tune)
		})
	}
}

// followDaemon starts a daemon on a fresh data directory, and makes an empty crew root.
func followDaemon(t *testing.T) (data, socket string, d *testDaemon, root *picrewtest.Root) {
	t.Helper()
	data = t.TempDir()
	socket = filepath.Join(brokertest.SocketDir(t), "run", "crewd.sock")
	d = startDaemon(t, data, socket)
	root, err := picrewtest.New(t.TempDir())
	require.NoError(t, err)
	return data, socket, d, root
}

// followSetup starts a daemon on a fresh data directory and a crew root
// whose run followRunA has its first six lifecycle steps written.
func followSetup(t *testing.T, progress int) (data, socket string, root *picrewtest.Root, a *picrewtest.Run) {
	t.Helper()
	data, socket, _, root = followDaemon(t)
	a, err := root.NewRun(followRunA)
	require.NoError(t, err)
	for _, s := range picrewtest.Lifecycle(a, progress)[:6] {
		require.NoError(t, s())
	}
	return data, socket, root, a
}

func measureFollow(t *testing.T, lines int, tune func(*picrew.FollowOptions)) {
	_, socket, root, a := followSetup(t, 0)
	fr := startFollower(t, root.Dir, socket, tune)
	fr.settle(t)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := adminOf(t, ctx, socket)
	sub, err := c.Subscribe(ctx, 0, nil, client.WithRun(followRunA))
	require.NoError(t, err)
	defer sub.Close()
	nextImported := func() int64 {
		for {
			ev, err := sub.Next(ctx)
			require.NoError(t, err)
			var te struct {
				Metadata struct {
					Imported *struct {
						Seq int64 `json:"seq"`
					} `json:"imported"`
				} `json:"metadata"`
			}
			require.NoError(t, json.Unmarshal(ev.Data, &te))
			if te.Metadata.Imported != nil {
				return te.Metadata.Imported.Seq
			}
		}
	}
	lat := make([]time.Duration, 0, lines)
	for range lines {
		start := time.Now()
		seq, err := a.Event("task.progress", "01_plan", map[string]any{"at": start.UnixNano()})
		require.NoError(t, err)
		require.Equal(t, int64(seq), nextImported(), "each line once, in order")
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	t.Logf("follow latency, file write → event at a subscriber, %d lines: p50 %v, p99 %v, max %v (a shared machine)",
		len(lat), p(0.50), p(0.99), lat[len(lat)-1])
}

// TestImportFollowCommand: crewctl import picrew ROOT --follow imports
// through crewd, prints its progress, and stops cleanly on interrupt.
func TestImportFollowCommand(t *testing.T) {
	data, socket, root, _ := followSetup(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	codes := make(chan int, 1)
	go func() {
		codes <- run(ctx, []string{"import", "picrew", root.Dir, "--follow", "--json", "--data", data, "--socket", socket},
			stdio{out: pw, err: pw}, dialBroker)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var stopped bool
	for sc.Scan() {
		var line map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), sc.Text())
		if p, ok := line["progress"]; ok {
			var st picrew.FollowStats
			require.NoError(t, json.Unmarshal(p, &st))
			require.Positive(t, st.Appended)
			cancel() // an interrupt
		}
		if _, ok := line["stopped"]; ok {
			stopped = true
		}
	}
	require.True(t, stopped)
	require.Equal(t, exitOK, <-codes)

	// The run is in crewd's store, imported through the socket.
	c := adminOf(t, context.Background(), socket)
	var res map[string]any
	require.NoError(t, c.Call(context.Background(), "query.run", map[string]any{"runId": followRunA}, &res))

	// Without a daemon it says so at once.
	r := crewctl(t, dialBroker, "import", "picrew", root.Dir, "--follow", "--data", data, "--socket", socket+".none")
	require.Equal(t, exitOpen, r.code, r.err)
	require.Contains(t, r.err, "connect to crewd")
}

// TestImportFollowWithATokenCrewdRefuses: a hello crewd refuses (an admin token file of another crewd's, one
// rotated since) is crewd not reached with the admin credential, exit 3, as for every other live command; import
// picrew --follow exited 1, which says an import left runs unread.
func TestImportFollowWithATokenCrewdRefuses(t *testing.T) {
	data, socket := liveDaemon(t)
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "state", "runs"), 0o700))
	stale := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, writeFile(stale, "another-crewds-token\n"))
	for _, args := range [][]string{{"runs"}, {"import", "picrew", root, "--follow"}} {
		r := crewctl(t, dialBroker, append(args, "--data", data, "--socket", socket, "--token-file", stale)...)
		require.Equal(t, exitOpen, r.code, "%v: %s", args, r.err)
		require.Contains(t, r.err, "connect to crewd at "+socket, args)
		require.Contains(t, r.err, "hello rejected", args)
	}
}

// TestImportFollowSaysCrewdFails: once crewd stops answering (stopped; or refusing every import.append, disk-full,
// unavailable) the follower keeps the writes and retries, and says so at most once a second, with the writes it
// holds, and its last line counts the failed calls; it said nothing, and stopped with a line like a clean import's.
func TestImportFollowSaysCrewdFails(t *testing.T) {
	data, socket, d, root := followDaemon(t)
	a, err := root.NewRun(followRunA)
	require.NoError(t, err)
	steps := picrewtest.Lifecycle(a, 3)
	for _, s := range steps[:6] {
		require.NoError(t, s())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := lockedBuffer{wrote: make(chan struct{}, 1)}
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"import", "picrew", root.Dir, "--follow", "--json", "--data", data, "--socket", socket},
			stdio{out: &out, err: &out}, dialBroker)
	}()
	guard := time.NewTimer(time.Minute) // a guard against a hung test, not a timing assertion
	defer guard.Stop()
	waitFor := func(key string) map[string]json.RawMessage {
		t.Helper()
		for {
			for line := range strings.Lines(out.String()) {
				var l map[string]json.RawMessage
				require.NoError(t, json.Unmarshal([]byte(line), &l), line)
				if _, ok := l[key]; ok {
					return l
				}
			}
			select {
			case <-out.wrote:
			case <-guard.C:
				require.FailNow(t, "no "+key+" line", out.String())
			}
		}
	}
	waitFor("progress")
	d.stop()
	for _, s := range steps[6:] {
		require.NoError(t, s())
	}
	var failing picrew.FollowStats
	require.NoError(t, json.Unmarshal(waitFor("failing")["failing"], &failing))
	require.Positive(t, failing.SendErrors)
	require.Positive(t, failing.Pending, "the writes are kept")
	cancel()
	require.Equal(t, exitOK, <-code, out.String())
	var stopped picrew.FollowStats
	require.NoError(t, json.Unmarshal(waitFor("stopped")["stopped"], &stopped))
	require.GreaterOrEqual(t, stopped.SendErrors, failing.SendErrors)
}
