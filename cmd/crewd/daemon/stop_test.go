package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
)

// started is a daemon Run in the background: its dashboard's base URL, and stop, which ends it and returns what Run
// returned.
type started struct {
	base string
	stop func() error
}

// startRun runs the daemon of c until stop is called, or the test ends, and returns once it serves.
func startRun(t *testing.T, c Config) started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, c, pw, discard()); pw.Close() }()
	sc := bufio.NewScanner(pr)
	base, serving := "", false
	for !serving && sc.Scan() {
		line := sc.Text()
		if u, ok := strings.CutPrefix(line, "crewd: dashboard "); ok {
			base, _, _ = strings.Cut(u, "/login")
		}
		serving = strings.HasPrefix(line, "crewd: socket ")
	}
	if !serving {
		// The scan ends at crewd's exit or on a read error while Run goes on: stop it (and let its writes fail, with
		// no reader left) before waiting for it.
		cancel()
		pr.Close()
		err := <-done
		require.NoError(t, sc.Err(), "reading crewd's output")
		require.NoError(t, err, "crewd stopped before it served")
		require.FailNow(t, "crewd stopped before it served")
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return started{base: base, stop: stop}
}

// mainUmask sets Main's umask for the test: without it a store Run makes is not private, and a second Run refuses it.
func mainUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })
}

// TestRunStopsWithWorkInFlight: a stop while commands are submitted, a task.waitStatus waits, a subscription and a
// dashboard stream are open ends all of them promptly, Run returns nil, the socket file is removed, no goroutine is
// left behind, and a restart on the same data directory holds every command that was answered success.
func TestRunStopsWithWorkInFlight(t *testing.T) {
	mainUmask(t)
	c := testConfig(t)
	c.HTTPAddr = "127.0.0.1:0"
	before := runtime.NumGoroutine()
	d := startRun(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	token, err := AdminToken(c.DataDir)
	require.NoError(t, err)
	admin, err := client.Dial(ctx, c.SocketPath, client.Hello{Role: "admin", Token: token}, nil)
	require.NoError(t, err)
	defer admin.Close()
	var run struct {
		RunID             string `json:"runId"`
		OrchestratorToken string `json:"orchestratorToken"`
	}
	require.NoError(t, admin.Call(ctx, "run.create", map[string]any{"team": "team", "goal": "stop", "cwd": "/repo"}, &run))
	orch, err := client.Dial(ctx, c.SocketPath, client.Hello{RunID: run.RunID, TaskID: "orchestrator", Token: run.OrchestratorToken}, nil)
	require.NoError(t, err)
	defer orch.Close()
	create := func(cl *client.Client, task string) error {
		return cl.Call(ctx, "task.create", map[string]any{"taskId": task, "role": "executor", "agent": "agent",
			"title": "task " + task, "cwd": "/repo/" + task}, nil)
	}
	require.NoError(t, create(orch, "P"))
	require.NoError(t, orch.Call(ctx, "task.transition", map[string]any{"taskId": "P", "to": "running"}, nil))
	var cred struct {
		Token string `json:"token"`
	}
	require.NoError(t, orch.Call(ctx, "credential.issue", map[string]any{"taskId": "P"}, &cred))
	worker, err := client.Dial(ctx, c.SocketPath, client.Hello{RunID: run.RunID, TaskID: "P", Token: cred.Token}, nil)
	require.NoError(t, err)
	defer worker.Close()

	waited := make(chan error, 1)
	go func() {
		waited <- worker.Call(ctx, "task.waitStatus", map[string]any{"taskId": "P", "until": "completed", "timeoutMs": 600000}, nil)
	}()
	sub, err := worker.Subscribe(ctx, 0, nil)
	require.NoError(t, err)
	subEnded := make(chan error, 1)
	go func() {
		for {
			if _, err := sub.Next(ctx); err != nil {
				subEnded <- err
				return
			}
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/api/v1/stream", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	streamEnded := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, resp.Body); resp.Body.Close(); streamEnded <- err }()

	// Commands in flight at the stop: every one answered success must be there after the restart.
	var (
		mu    sync.Mutex
		acked []string
	)
	writers, firstAck := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(writers)
		for i := 0; ; i++ {
			task := fmt.Sprintf("T%d", i)
			if err := create(orch, task); err != nil {
				return
			}
			mu.Lock()
			acked = append(acked, task)
			mu.Unlock()
			if i == 0 {
				close(firstAck)
			}
		}
	}()
	<-firstAck // the stop comes while the writer has commands in flight

	require.NoError(t, d.stop())
	for name, ch := range map[string]chan error{"wait": waited, "subscription": subEnded} {
		require.Error(t, <-ch, "the %s ended with the stop", name)
	}
	<-streamEnded // NB: a stream the server closes may end as a clean EOF
	<-writers
	_, err = os.Lstat(c.SocketPath)
	require.ErrorIs(t, err, os.ErrNotExist, "the socket file is removed")
	admin.Close()
	orch.Close()
	worker.Close()
	http.DefaultClient.CloseIdleConnections()

	d = startRun(t, c)
	admin, err = client.Dial(ctx, c.SocketPath, client.Hello{Role: "admin", Token: token}, nil)
	require.NoError(t, err)
	have := map[string]bool{}
	for cursor := ""; ; {
		var page struct {
			Tasks []struct {
				ID string `json:"id"`
			} `json:"tasks"`
			NextCursor string `json:"nextCursor"`
			HasMore    bool   `json:"hasMore"`
		}
		params := map[string]any{"runId": run.RunID, "limit": 1000}
		if cursor != "" {
			params["cursor"] = cursor
		}
		require.NoError(t, admin.Call(ctx, "query.tasks", params, &page))
		for _, tk := range page.Tasks {
			have[tk.ID] = true
		}
		if !page.HasMore {
			break
		}
		cursor = page.NextCursor
	}
	mu.Lock()
	require.NotEmpty(t, acked)
	for _, task := range acked {
		require.True(t, have[task], "task %s was answered success before the stop", task)
	}
	mu.Unlock()
	admin.Close()
	require.NoError(t, d.stop())

	// NB: a goroutine gives no sign when it has ended, so the count is polled, for 10 s at most.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after the stop, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}
