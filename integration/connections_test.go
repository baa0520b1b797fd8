package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
)

// Adversarial tests against a real crewd: what a worker that loops, floods or probes can and cannot do to the
// daemon and to the rest of the crew (docs/protocol.md, "Limits per principal").

// teamEventData is what these tests read of a team.event push.
type teamEventData struct {
	Type     string `json:"type"`
	Metadata struct {
		Position uint64 `json:"position"`
	} `json:"metadata"`
}

// TestHostileEndedCredentialCutsConnection: revocation, a task reaching a terminal status and the run's end each
// end the worker's open connection at once with one frame naming why — its subscription delivers nothing the
// change published — while the orchestrator keeps its connection through the run's end.
func TestHostileEndedCredentialCutsConnection(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	d := newDaemon(t)
	t.Cleanup(d.cleanup)
	d.start()
	c := newCrew(ctx, t, d, "P", "Q", "R")
	orch := d.mustDial(ctx, c.orch)
	admin := d.mustDial(ctx, adminHello(d))
	require.NoError(t, orch.Call(ctx, "run.transition", map[string]any{"to": "running"}, nil))

	cases := []struct {
		task   string
		change func()
		code   wire.Code
	}{
		{"P", func() {
			require.NoError(t, orch.Call(ctx, "credential.revoke", map[string]any{"taskId": "P"}, nil))
		}, wire.CodeRevoked},
		{"Q", func() {
			require.NoError(t, orch.Call(ctx, "task.transition", map[string]any{"taskId": "Q", "to": "completed"}, nil))
		}, wire.CodeStaleToken},
		{"R", func() {
			require.NoError(t, orch.Call(ctx, "run.transition", map[string]any{"to": "completed"}, nil))
		}, wire.CodeStaleToken},
	}
	for _, tc := range cases {
		worker := d.mustDial(ctx, c.workers[tc.task])
		sub, err := worker.Subscribe(ctx, 0, nil)
		require.NoError(t, err)
		head := logHead(ctx, t, admin, c.runID)
		tc.change()
		<-worker.Done()
		require.Equal(t, tc.code, wire.CodeOf(worker.Err()), "task %s: the close names why", tc.task)
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				require.Equal(t, tc.code, wire.CodeOf(err), "task %s: the subscription ends with the same frame", tc.task)
				break
			}
			var data teamEventData
			require.NoError(t, json.Unmarshal(ev.Data, &data))
			require.LessOrEqual(t, data.Metadata.Position, head, "task %s: pushed %s, published by or after the change", tc.task, data.Type)
		}
		_, err = d.dial(ctx, c.workers[tc.task])
		require.Contains(t, []wire.Code{wire.CodeRevoked, wire.CodeStaleToken}, wire.CodeOf(err), "task %s: a new hello is refused", tc.task)
	}
	require.NoError(t, orch.Call(ctx, "ping", nil, nil), "the orchestrator survives the run's end")
}

// logHead is the run's last position as the admin reads it.
func logHead(ctx context.Context, t *testing.T, admin *client.Client, runID string) uint64 {
	t.Helper()
	var page struct {
		Events  []json.RawMessage `json:"events"`
		HasMore bool              `json:"hasMore"`
		NextSeq uint64            `json:"nextSeq"`
	}
	var head uint64
	since := uint64(0)
	for {
		require.NoError(t, admin.Call(ctx, "events.since", map[string]any{"runId": runID, "sinceSeq": since}, &page))
		for _, raw := range page.Events {
			var ev teamEventData
			require.NoError(t, json.Unmarshal(raw, &ev))
			head = max(head, ev.Metadata.Position)
		}
		if !page.HasMore {
			return head
		}
		since = page.NextSeq
	}
}

// TestHostileConnectionFlood: one worker token opening connections as fast as it can gets its share and a clear
// refusal for every one beyond — never a reset — and the orchestrator and admin still connect while every
// worker place is taken.
func TestHostileConnectionFlood(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	d := newDaemon(t, "--max-conns", "40", "--reserved-conns", "8", "--max-conns-per-credential", "8")
	t.Cleanup(d.cleanup)
	d.start()
	c := newCrew(ctx, t, d, "W0", "W1", "W2", "W3", "W4")
	held, refused := 0, map[wire.Code]int{}
	for _, task := range []string{"W0", "W1", "W2", "W3", "W4"} {
		for i := 0; i < 12; i++ {
			cl, err := d.dial(ctx, c.workers[task])
			if err != nil {
				refused[wire.CodeOf(err)]++
				continue
			}
			t.Cleanup(func() { cl.Close() })
			held++
		}
	}
	require.Equal(t, 32, held, "workers hold max-conns − reserved-conns")
	require.Equal(t, map[wire.Code]int{wire.CodeTooManyConnections: 60 - 32}, refused, "every refusal is a frame with a code")
	o := d.mustDial(ctx, c.orch)
	require.NoError(t, o.Call(ctx, "ping", nil, nil))
	a := d.mustDial(ctx, adminHello(d))
	require.NoError(t, a.Call(ctx, "ping", nil, nil))
}

// TestHostileWaitAndSubscriptionCaps: a worker cannot pile up waits or subscriptions beyond its credential's
// share, across connections; each refusal leaves its connection usable.
func TestHostileWaitAndSubscriptionCaps(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	d := newDaemon(t, "--max-waits-per-conn", "3", "--max-waits-per-credential", "5", "--max-subscriptions-per-credential", "2")
	t.Cleanup(d.cleanup)
	d.start()
	c := newCrew(ctx, t, d, "P", "Q")
	a, b := d.mustDial(ctx, c.workers["P"]), d.mustDial(ctx, c.workers["P"])
	waits := make(chan error, 8)
	wait := func(cl *client.Client) {
		go func() {
			waits <- cl.Call(ctx, "task.waitStatus", map[string]any{"taskId": "Q", "until": "completed", "timeoutMs": 60000}, nil)
		}()
	}
	for i := 0; i < 3; i++ {
		wait(a)
	}
	for i := 0; i < 3; i++ {
		wait(b)
	}
	// Six waits for a limit of five: exactly one is refused, at once.
	require.Equal(t, wire.CodeTooManyWaits, wire.CodeOf(<-waits))
	require.Equal(t, wire.CodeTooManyWaits, wire.CodeOf(a.Call(ctx, "task.waitStatus", map[string]any{"taskId": "Q", "until": "completed"}, nil)))
	require.NoError(t, a.Call(ctx, "ping", nil, nil))

	s1, err := b.Subscribe(ctx, 0, nil)
	require.NoError(t, err)
	defer s1.Close()
	s2, err := b.Subscribe(ctx, 0, nil)
	require.NoError(t, err)
	defer s2.Close()
	_, err = b.Subscribe(ctx, 0, nil)
	require.Equal(t, wire.CodeTooManySubscriptions, wire.CodeOf(err))

	o := d.mustDial(ctx, c.orch)
	require.NoError(t, o.Call(ctx, "task.transition", map[string]any{"taskId": "Q", "to": "completed"}, nil))
	for i := 0; i < 5; i++ {
		require.NoError(t, <-waits, "the waits within the limit are answered")
	}
}

// TestHostileIdleConnectionClosed: a connection that says hello and then nothing is closed after --idle-timeout
// with an idle-timeout frame.
func TestHostileIdleConnectionClosed(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	d := newDaemon(t, "--idle-timeout", "200ms")
	t.Cleanup(d.cleanup)
	d.start()
	c := newCrew(ctx, t, d, "P")
	start := time.Now() // before the hello: the broker arms the idle timer when it accepts it
	w := d.mustDial(ctx, c.workers["P"])
	<-w.Done()
	require.Equal(t, wire.CodeIdleTimeout, wire.CodeOf(w.Err()))
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
}

// rawSubscriber connects, authenticates and subscribes from seq 0, and then never reads again: the hostile
// consumer the outbound budgets are for.
func rawSubscriber(t *testing.T, socket string, h client.Hello) net.Conn {
	t.Helper()
	nc, err := net.Dial("unix", socket)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	hello, err := json.Marshal(map[string]any{"id": "h", "method": "hello", "params": h})
	require.NoError(t, err)
	_, err = nc.Write(append(hello, '\n'))
	require.NoError(t, err)
	nc.SetReadDeadline(time.Now().Add(startTimeout))
	line, err := bufio.NewReader(nc).ReadString('\n') // the ack: nothing else is sent before it
	require.NoError(t, err)
	require.Contains(t, line, `"ok":true`)
	_, err = nc.Write([]byte(`{"id":"s","method":"events.subscribe","params":{"sinceSeq":0}}` + "\n"))
	require.NoError(t, err)
	return nc
}

// rssBytes is the resident set size of process pid (Linux).
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// sampleEverySecond calls sample once a second until ctx is done: sampling
// RSS is a measurement, not a synchronisation.
func sampleEverySecond(ctx context.Context, sample func()) {
	for ctx.Err() == nil {
		sample()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// TestHostileNeverReadingSubscribersBoundedMemory: 30 subscribers that never read, on a run whose messages are
// 200 KB each, cost crewd at most its configured outbound budget, not what they are owed. Measured within one run:
// crewd's RSS growth while 60 such messages commit with nobody subscribed (the store and state growing), then while
// 60 more commit with the 30 stalled subscribers (360 MB owed to them); the difference stays below
// --global-outbound-bytes + connections × max-frame.
func TestHostileNeverReadingSubscribersBoundedMemory(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	const global, perConn, subscribers = 8 << 20, 1 << 20, 30
	d := newDaemon(t, "--global-outbound-bytes", strconv.Itoa(global), "--outbound-bytes", strconv.Itoa(perConn),
		"--max-conns-per-credential", "64")
	t.Cleanup(d.cleanup)
	d.start()
	c := newCrew(ctx, t, d, "P")
	o := d.mustDial(ctx, c.orch)
	body := strings.Repeat("b", 200_000)
	send := func() {
		for i := 0; i < 60; i++ {
			require.NoError(t, o.Call(ctx, "msg.send", map[string]any{"to": "P", "body": body}, nil))
		}
	}
	rss0 := rssBytes(t, d.cmd.Process.Pid)
	send()
	rss1 := rssBytes(t, d.cmd.Process.Pid)
	for i := 0; i < subscribers; i++ {
		rawSubscriber(t, d.socket, c.workers["P"])
	}
	send()
	require.NoError(t, o.Call(ctx, "ping", nil, nil))
	rss2 := rssBytes(t, d.cmd.Process.Pid)
	alone, stalled := rss1-rss0, rss2-rss1
	bound := int64(global + (subscribers+2)*262144)
	t.Logf("crewd RSS growth: %d MiB for 60 messages alone, %d MiB for 60 with %d stalled subscribers (excess bound %d MiB)",
		alone>>20, stalled>>20, subscribers, bound>>20)
	require.Less(t, stalled-alone, bound, "outbound memory beyond the configured budgets")
}
