package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
)

// SimOptions configure Simulate. Zero fields mean defaults.
type SimOptions struct {
	Socket    string        // crewd's socket
	TokenFile string        // crewd's admin token file
	Runs      int           // concurrent runs (default 2)
	Workers   int           // worker tasks per run (default 4)
	Duration  time.Duration // how long the crew works before winding down (default 20 s)
	Seed      uint64        // 0: random
	Every     time.Duration // progress interval (default 1 s)
	Out       io.Writer     // progress and summary (default discard)
}

// simulation is one Simulate call: the shared stats and connections.
type simulation struct {
	o        SimOptions
	stats    *simStats
	inFlight atomic.Int64
	mu       sync.Mutex
	open     []*client.Client
}

// Simulate drives a running crewd with a realistic crew: per run an
// orchestrator (the runtime) that creates the run and its tasks, issues
// credentials, spawns and settles every admitted delegation (ok, failed,
// timed out, cancelled), steers workers; workers that delegate with budgets,
// ask questions and message their parent; grandchildren that, once spawned,
// sometimes delegate further. After Duration it winds down (settles what is
// in flight, completes the tasks and the runs) and prints a summary.
func Simulate(ctx context.Context, o SimOptions) error {
	if o.Runs <= 0 {
		o.Runs = 2
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Duration <= 0 {
		o.Duration = 20 * time.Second
	}
	if o.Every <= 0 {
		o.Every = time.Second
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	tok, err := os.ReadFile(o.TokenFile)
	if err != nil {
		return fmt.Errorf("bench: admin token: %w", err)
	}
	s := &simulation{o: o, stats: newSimStats()}
	admin, err := s.dial(ctx, client.Hello{Role: "admin", Token: strings.TrimSpace(string(tok))})
	if err != nil {
		return unreachedErr(o.Socket, o.TokenFile, err)
	}
	defer s.closeAll()
	fmt.Fprintf(o.Out, "crewbench sim: %d runs × %d workers for %s against %s (seed %d)\n", o.Runs, o.Workers,
		o.Duration, o.Socket, o.Seed)

	began := time.Now()
	work, stop := context.WithTimeout(ctx, o.Duration)
	defer stop()
	crews := make([]*crew, o.Runs)
	errs := make([]error, o.Runs)
	var wg sync.WaitGroup
	for i := range crews {
		crews[i] = &crew{sim: s, rng: rand.New(rand.NewPCG(o.Seed, uint64(i))), spawn: make(chan grandchild, 256)}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = crews[i].run(ctx, work, admin, i)
		}(i)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(o.Every)
	defer tick.Stop()
	lastCalls := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-tick.C:
			calls, admitted, rejected := s.stats.snapshot()
			fmt.Fprintf(o.Out, "  %5.1fs  calls %6d (%4.0f/s)  admitted %5d  rejected %5d  in flight %3d\n",
				time.Since(began).Seconds(), calls, float64(calls-lastCalls)/o.Every.Seconds(), admitted, rejected,
				s.inFlight.Load())
			lastCalls = calls
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	events := 0
	for _, c := range crews {
		events += c.events
	}
	s.stats.write(o.Out, time.Since(began), events)
	return nil
}

func (s *simulation) dial(ctx context.Context, h client.Hello) (*client.Client, error) {
	c, err := client.Dial(ctx, s.o.Socket, h, nil)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.open = append(s.open, c)
	s.mu.Unlock()
	return c, nil
}

func (s *simulation) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.open {
		_ = c.Close()
	}
}

// call sends one request, times it and counts its outcome. A refusal (an
// error code the method documents) is counted by reason and returned as
// errRefused; a transport error is returned as is.
func (s *simulation) call(ctx context.Context, c *client.Client, method string, params, result any) error {
	t0 := time.Now()
	err := c.Call(ctx, method, params, result)
	code := wire.CodeOf(err)
	switch {
	case err == nil:
		s.stats.call(method, time.Since(t0))
		return nil
	case code != "":
		s.stats.call(method, time.Since(t0))
		reason := string(code)
		if code == wire.CodePolicyDenied || code == wire.CodeBadParams && method == "delegate.request" {
			reason = simReason(err.Error(), string(code))
		}
		s.stats.reject(method, reason)
		return fmt.Errorf("%w: %w", errRefused, err)
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		s.stats.fail(method)
		return err
	}
}

var errRefused = errors.New("bench: refused")

// simReason names the admission rule a refusal's message gives.
func simReason(msg, code string) string {
	for _, r := range []struct{ match, reason string }{
		{"nested spawn budget exhausted", "slots-exhausted"},
		{"its share", "slot-share-exceeded"}, // the run's share of the slots, or a worker's of its run's
		{"requested budget", "budget-insufficient"},
		{"exceeds maxDepth", "depth-exceeded"},
		{"not running", "parent-not-running"},
		{"overlaps", "workspace-conflict"},
		{"unmeteredDelegates", "unmetered-denied"},
	} {
		if strings.Contains(msg, r.match) {
			return r.reason
		}
	}
	return code
}
