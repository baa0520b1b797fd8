package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/eventlog/disktest"
	"github.com/crewlog/crewlog/events"
)

// A crewd whose flush fails only after Pebble held its engine's commit back (its second memtable full, queued for
// the flush) says why and exits non-zero after its drain, without waiting for good for its engine and log to close,
// which they cannot while the commit waits inside Pebble; where crewd, its engine never told of the failure, went on
// serving, and a stop hung in the closes. The store reopens once the disk has space. A scrape of the dashboard's
// metrics made while the commit is held ends too, where the log's storage statistics waited for the lock the held
// commit holds and the dashboard's close, before the store's, waited for good for that request; and so does an
// operator's checkpoint made then, where it waited for good for the lock of the log's writes made without a sync,
// which the held commit holds too, and the socket server's close with it.
func TestCrewdExitsWhenItsLogFailsWithACommitHeldInPebble(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inFlight string // made while the commit is held: "scrape" (the dashboard's metrics), "checkpoint" (the admin's)
	}{
		{name: "no request in flight"},
		{name: "a metrics scrape in flight", inFlight: "scrape"},
		{name: "an operator's checkpoint in flight", inFlight: "checkpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) { crewdExitsWithACommitHeldInPebble(t, tc.inFlight) })
	}
}

func crewdExitsWithACommitHeldInPebble(t *testing.T, inFlight string) {
	disk := disktest.NewSlowThenFull()
	tableWrites := slowThenFullTables(disk)
	storeOptions = func(o *eventlog.Options) { o.FS = errorfs.Wrap(vfs.Default, tableWrites) }
	// NB: the store's close, which waits for the held commit, is given up after failedStoreClose: that it is, not
	// how long it takes, is what crewd's exit rests on.
	bound := failedStoreClose
	failedStoreClose = 200 * time.Millisecond
	c := testConfig(t)
	c.MemTableBytes = 256 << 10
	if inFlight == "scrape" {
		c.HTTPAddr = "127.0.0.1:0"
	}
	t.Cleanup(func() {
		storeOptions = storeFaults
		// NB: the disk gets its space back, so that the commit held in Pebble ends and the abandoned closes with it.
		disk.Free()
		require.Eventually(t, func() bool {
			l, err := eventlog.Open(filepath.Join(c.DataDir, StoreDir), nil)
			if err != nil {
				return false
			}
			_, err = l.Verify(nil)
			require.NoError(t, err)
			require.NoError(t, l.Close())
			return true
		}, 30*time.Second, 10*time.Millisecond, "the store does not reopen")
		failedStoreClose = bound
	})
	logs, out := &lockedBuffer{}, &lockedBuffer{}
	stalls := disktest.NewStallWatch(logs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, c, out, slog.New(slog.NewTextHandler(stalls, nil))) }()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "crewd: socket ") }, 30*time.Second,
		10*time.Millisecond, "crewd does not serve: %s", logs.String())
	token, err := AdminToken(c.DataDir)
	require.NoError(t, err)
	admin, err := client.Dial(ctx, c.SocketPath, client.Hello{Role: "admin", Token: token}, nil)
	require.NoError(t, err)
	defer admin.Close()

	tableWrites.On()
	goal := strings.Repeat("g", 4000)
	go func() {
		for i := 0; i < 256; i++ {
			if admin.Call(ctx, "run.create", map[string]any{"team": "t", "goal": goal, "cwd": "/w"}, nil) != nil {
				return
			}
		}
	}()
	stalls.Wait(t, nil)
	switch inFlight {
	case "checkpoint":
		// NB: its own connection: the first one's calls wait for the held commit.
		operator, err := client.Dial(ctx, c.SocketPath, client.Hello{Role: "admin", Token: token}, nil)
		require.NoError(t, err)
		defer operator.Close()
		checkpointed := make(chan struct{})
		go func() {
			defer close(checkpointed)
			_ = operator.Call(ctx, "admin.checkpoint", map[string]any{"dir": filepath.Join(t.TempDir(), "copy")}, nil)
		}()
		// NB: the log tells no one outside it that a write waits for its lock; the goroutine that serves the
		// checkpoint shows it.
		require.Eventually(t, func() bool { return goroutineIn("broker.handleCheckpoint", "eventlog.(*Log).lockDerived") },
			10*time.Second, time.Millisecond, "the checkpoint does not wait for the lock the held commit holds")
		select {
		case <-checkpointed:
			t.Fatal("the checkpoint did not wait for the held commit")
		default:
		}
	case "scrape":
		base, _, _ := strings.Cut(strings.SplitN(out.String(), "crewd: dashboard ", 2)[1], "/login")
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		scraped := make(chan struct{})
		go func() {
			defer close(scraped)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		select {
		case <-scraped: // NB: answered before the failure; the dashboard's close has nothing to wait for
		case <-time.After(10 * time.Second):
			t.Fatal("the scrape waits for the held commit")
		}
	}
	disk.Fill()

	select {
	case err := <-done:
		require.ErrorIs(t, err, commands.ErrFailed)
		require.ErrorContains(t, err, syscall.ENOSPC.Error())
	case <-time.After(failDrain + failedStoreClose + 10*time.Second):
		t.Fatalf("crewd did not exit: %s", logs.String())
	}
	require.Contains(t, logs.String(), "the engine stopped after a commit error; answering reads, then exiting")
	require.Contains(t, logs.String(), "the event log did not close after its failure")
}

// slowThenFullTables is the fault of disk on the tables' writes once on.
func slowThenFullTables(disk *disktest.SlowThenFull) *errorfs.Toggle {
	return &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		return disk.Fault(op.Path, op.Kind.ReadOrWrite() == errorfs.OpIsWrite)
	})}
}

// goroutineIn reports whether a goroutine runs, or waits in, every one of funcs (names as a stack shows them).
func goroutineIn(funcs ...string) bool {
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, stack := range strings.Split(stacks, "\n\n") {
		in := true
		for _, f := range funcs {
			in = in && strings.Contains(stack, f)
		}
		if in {
			return true
		}
	}
	return false
}

// TestAStoreThatDoesNotCloseAfterItsFailureIsNoCleanClose: a store whose log failed stop with a commit held inside
// Pebble, which closeStore gives up waiting for, is a failure crewd exits with, where closeStore answered nil and a
// stop asked for meanwhile (SIGTERM, the engine not failed yet) exited 0 with a store its next start must recover.
func TestAStoreThatDoesNotCloseAfterItsFailureIsNoCleanClose(t *testing.T) {
	bound := failedStoreClose
	failedStoreClose = 200 * time.Millisecond
	t.Cleanup(func() { failedStoreClose = bound })
	disk := disktest.NewSlowThenFull()
	tableWrites := slowThenFullTables(disk)
	stalls := disktest.NewStallWatch(nil)
	l, err := eventlog.Open("db", &eventlog.Options{FS: errorfs.Wrap(vfs.NewMem(), tableWrites), MemTableSize: 256 << 10,
		Logger: slog.New(slog.NewTextHandler(stalls, nil))})
	require.NoError(t, err)
	eng, err := commands.Open(l, commands.Options{ExpiryInterval: -1})
	require.NoError(t, err)
	closed := make(chan struct{})
	t.Cleanup(func() {
		// NB: the disk gets its space back, so that the held commit, and the closes closeStore gave up, end.
		disk.Free()
		<-closed
	})
	tableWrites.On()
	goal := strings.Repeat("g", 4000)
	go func() {
		for i := 0; i < 256; i++ {
			if _, err := eng.Submit(context.Background(), commands.Request{Actor: events.AdminPrincipal().Actor(),
				Command: &commands.RunCreate{RunID: fmt.Sprintf("R%d", i), Team: "t", Goal: goal, Cwd: "/w"}}); err != nil {
				return
			}
		}
	}()
	stalls.Wait(t, nil)
	disk.Fill()
	select {
	case <-l.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("the log did not fail stop")
	}

	go func() {
		defer close(closed)
		err = closeStore(nil, eng, l, slog.New(slog.DiscardHandler))
	}()
	select {
	case <-closed:
	case <-time.After(failedStoreClose + 10*time.Second):
		t.Fatal("closeStore waits for the held commit")
	}
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.ErrorContains(t, err, "the event log failed stop")
}

// TestAStoreWhoseLogFailedIsNoCleanCloseThoughItCloses: a store whose log failed stop (a flush that met a full disk)
// and that then closes, the disk given room, is a failure crewd exits with, where closeStore answered nil for the
// close that returned no error, and a stop asked for while a write failed exited 0 with a store its next start must
// recover.
func TestAStoreWhoseLogFailedIsNoCleanCloseThoughItCloses(t *testing.T) {
	tableWrites := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".sst") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	})}
	l, err := eventlog.Open("db", &eventlog.Options{FS: errorfs.Wrap(vfs.NewMem(), tableWrites),
		MemTableSize: 256 << 10})
	require.NoError(t, err)
	eng, err := commands.Open(l, commands.Options{ExpiryInterval: -1})
	require.NoError(t, err)
	tableWrites.On()
	goal := strings.Repeat("g", 4000)
	for i := 0; ; i++ {
		require.Less(t, i, 256, "the flush did not fail the log")
		if _, err := eng.Submit(context.Background(), commands.Request{Actor: events.AdminPrincipal().Actor(),
			Command: &commands.RunCreate{RunID: fmt.Sprintf("R%d", i), Team: "t", Goal: goal, Cwd: "/w"}}); err != nil {
			break
		}
	}
	require.Eventually(t, func() bool { return l.Err() != nil }, 10*time.Second, time.Millisecond)
	tableWrites.Off() // NB: the disk has room again: the flush's retry lands and the store closes

	err = closeStore(nil, eng, l, slog.New(slog.DiscardHandler))
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.ErrorContains(t, err, "the event log failed stop")
}
