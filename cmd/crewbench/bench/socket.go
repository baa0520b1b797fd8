package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

// socketStore is crewlog over its socket: crewd on a real unix socket, in
// a process of its own (this executable running crewd's daemon with crewd's
// flags, socket_server.go, so nothing needs building), driven through
// broker/client — every request is NDJSON-encoded, authenticated and answered
// over the socket, as a worker and its runtime would. Its CPU per operation
// is the server process's; the clients' is reported beside it.
//
// With several clients on one run each is a worker task of the run with a
// connection of its own (the budget the check exercises is the first task's;
// the timed workload's budget never binds), so the run is still the one
// stream every admission contends on.
type socketStore struct {
	srv     *socketServer
	sockDir string
	admin   *client.Client
	workers map[string]chan *client.Client // per run: one connection per client
	orchs   map[string]chan *client.Client
	all     []*client.Client
}

func openSocketStore(dir string, slots int) (*socketStore, error) {
	// NB: a short directory of its own: unix socket paths are limited to
	// 108 bytes and the data directory may be deep.
	sockDir, err := os.MkdirTemp("", "crewbench-")
	if err != nil {
		return nil, err
	}
	s := &socketStore{sockDir: sockDir, workers: map[string]chan *client.Client{},
		orchs: map[string]chan *client.Client{}}
	tok := randomHex(32)
	s.srv, err = startSocketServer(dir, slots, filepath.Join(sockDir, "s", "crewd.sock"), tok)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(sockDir))
	}
	s.admin, err = client.Dial(context.Background(), s.srv.socket, client.Hello{Role: "admin", Token: tok}, nil)
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	s.all = append(s.all, s.admin)
	return s, nil
}

// serverCPU is the server process's CPU time so far: runCell charges it to
// the operations, and this process's own time to the clients.
func (s *socketStore) serverCPU() (time.Duration, error) { return s.srv.cpu() }

// profileServer profiles the server process over a timed run (runCell).
func (s *socketStore) profileServer(prefix string) error { return s.srv.profile(prefix) }

func (s *socketStore) stopServerProfile(ops int64) (string, error) { return s.srv.profileStop(ops) }

// Commits counts the server's engine's committed groups.
func (s *socketStore) Commits() int64 {
	st, err := s.srv.stats()
	if err != nil {
		return -1
	}
	return int64(st.Engine.Groups)
}

// groupStats are the server's engine's counters: a socket cell reports its
// groups as the in-process cell does (zero if the server does not answer,
// which the cell's own requests then report).
func (s *socketStore) groupStats() commands.Stats {
	st, err := s.srv.stats()
	if err != nil {
		return commands.Stats{}
	}
	return st.Engine
}

// SyncShare is the server's engine's pipeline depth (engineStore.SyncShare).
func (s *socketStore) SyncShare() int64 {
	st, err := s.srv.stats()
	if err != nil {
		return 1
	}
	return st.SyncShare
}

// Final stops the server and reads the runs back from the log it wrote.
func (s *socketStore) Final(context.Context) (map[string]Final, error) { return s.srv.final() }

func randomHex(n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *socketStore) dial(ctx context.Context, h client.Hello) (*client.Client, error) {
	c, err := client.Dial(ctx, s.srv.socket, h, nil)
	if err == nil {
		s.all = append(s.all, c)
	}
	return c, err
}

func (s *socketStore) Setup(ctx context.Context, runs []string, spec Spec) error {
	n := max(spec.Clients, 1)
	for _, r := range runs {
		var created struct{ OrchestratorToken string }
		if err := s.admin.Call(ctx, "run.create", map[string]any{"runId": r, "team": "bench", "goal": "benchmark",
			"cwd": "/w", "budgetTotal": spec.Budget}, &created); err != nil {
			return err
		}
		orch, err := s.dial(ctx, client.Hello{RunID: r, TaskID: events.OrchestratorKey,
			Token: created.OrchestratorToken})
		if err != nil {
			return err
		}
		for _, st := range []struct{ method, to string }{{"run.transition", "running"}} {
			if err := orch.Call(ctx, st.method, map[string]any{"to": st.to}, nil); err != nil {
				return err
			}
		}
		s.workers[r], s.orchs[r] = make(chan *client.Client, n), make(chan *client.Client, n)
		s.orchs[r] <- orch
		var issued struct{ Token string }
		for i := 0; i < n; i++ {
			// NB: each client is a worker task of its own, as in a crew: a
			// settlement's result is pushed to the parent task's connections,
			// and 64 connections sharing one task would each get every push.
			task := parentTask
			if i > 0 && !spec.OneParent {
				task = fmt.Sprintf("%s_%02d", parentTask, i)
			}
			steps := []struct {
				method string
				params map[string]any
				into   any
			}{
				{"task.create", map[string]any{"taskId": task, "role": "executor", "agent": "a", "title": "work",
					"cwd": "/w", "stepId": "work", "model": "anthropic/m1"}, nil},
				{"task.transition", map[string]any{"taskId": task, "to": "running"}, nil},
				{"credential.issue", map[string]any{"taskId": task}, &issued},
			}
			if i > 0 && spec.OneParent {
				steps = nil // one credential, a connection per client
			}
			for _, step := range steps {
				if err := orch.Call(ctx, step.method, step.params, step.into); err != nil {
					return err
				}
			}
			w, err := s.dial(ctx, client.Hello{RunID: r, TaskID: task, Token: issued.Token})
			if err != nil {
				return err
			}
			s.workers[r] <- w
			if i > 0 {
				o, err := s.dial(ctx, client.Hello{RunID: r, TaskID: events.OrchestratorKey,
					Token: created.OrchestratorToken})
				if err != nil {
					return err
				}
				s.orchs[r] <- o
			}
		}
	}
	return nil
}

// take borrows one of the run's connections: each concurrent client gets its
// own, as each worker has its own socket.
func take(ctx context.Context, pool chan *client.Client) (*client.Client, error) {
	select {
	case c := <-pool:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *socketStore) Admit(ctx context.Context, run string, tokens int64) (Admission, error) {
	pool, ok := s.workers[run]
	if !ok {
		return Admission{}, fmt.Errorf("bench: no run %s", run)
	}
	w, err := take(ctx, pool)
	if err != nil {
		return Admission{}, err
	}
	defer func() { pool <- w }()
	var res struct{ GrandchildTaskRef string }
	err = w.Call(ctx, "delegate.request", delegateRequestParams{Prompt: delegatePrompt, Description: delegateDesc,
		BudgetTokens: tokens, CommandID: newCommandID()}, &res)
	if err != nil {
		if c := wire.CodeOf(err); c == wire.CodePolicyDenied {
			return Admission{Reason: reasonOfMessage(err.Error())}, nil
		}
		return Admission{}, err
	}
	return Admission{SubID: res.GrandchildTaskRef}, nil
}

// reasonOfMessage recovers the policy rule from a policy-denied message (the
// wire carries the code and the message, not the reason).
func reasonOfMessage(msg string) string {
	switch {
	case strings.Contains(msg, "nested spawn budget exhausted"):
		return ReasonSlots
	case strings.Contains(msg, "requested budget"):
		return ReasonBudget
	}
	return "policy-denied: " + msg
}

func (s *socketStore) Settle(ctx context.Context, run, subID, outcome string) error {
	pool := s.orchs[run]
	o, err := take(ctx, pool)
	if err != nil {
		return err
	}
	defer func() { pool <- o }()
	return o.Call(ctx, "delegate.settle", delegateSettleParams{SubID: subID, Outcome: outcome, Text: resultText,
		CommandID: newCommandID()}, nil)
}

// delegateRequestParams and delegateSettleParams are the timed requests' params: a worker encodes its requests
// from types of its own, not from maps, whose encoding (reflection over every key, then sorting them) cost the
// clients more than framing the request.
type delegateRequestParams struct {
	Prompt       string `json:"prompt"`
	Description  string `json:"description"`
	BudgetTokens int64  `json:"budgetTokens"`
	CommandID    string `json:"commandId"`
}

type delegateSettleParams struct {
	SubID     string `json:"subId"`
	Outcome   string `json:"outcome"`
	Text      string `json:"text"`
	CommandID string `json:"commandId"`
}

func (s *socketStore) Close() error {
	for _, c := range s.all {
		_ = c.Close()
	}
	var err error
	if s.srv != nil {
		err = s.srv.stop()
	}
	return errors.Join(err, os.RemoveAll(s.sockDir))
}
