package commands

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// clock is the engine clock: it times out overdue delegations and overdue
// questions by submitting ordinary commands, so expiry is recorded and replayable, and a
// crash loses nothing (the next tick after a restart finds the same overdue
// delegations in the rebuilt state).
func (e *Engine) clock() {
	defer e.wg.Done()
	t := time.NewTicker(e.opts.ExpiryInterval)
	defer t.Stop()
	for {
		select {
		case <-e.quit:
			return
		case <-t.C:
			e.Tick(context.Background())
		}
	}
}

// Tick submits an expiry for every in-flight delegation past its deadline
// plus grace, for every pending question past its deadline and for every
// other one nobody can answer any more or whose run's park it outlived
// (DueExpiries), and returns how many it expired. The command id is derived from the delegation or the
// question, so two ticks (or a tick racing a restart) expire it once; it is
// the engine principal's, so no client can claim it first (a client's
// "expire:…" id is its own, unrelated command). An expiry that changes
// nothing is not recorded (group.go), so one refused as not yet due is
// decided again at the next tick. The tick and the expiries it submits read the engine's time (engine_time.go),
// which never goes back, so what a tick finds due is due when it is decided.
func (e *Engine) Tick(ctx context.Context) int {
	now := e.times.now().UnixMilli()
	var due []Request
	principal := events.EnginePrincipal()
	engine := principal.Actor()
	e.Read(func(s *projections.State) {
		for _, c := range DueExpiries(s, now) {
			due = append(due, Request{Principal: principal, CommandID: expiryID(c), Actor: engine, Command: c})
		}
	})
	// Submitted together, the expiries join the same group: one synced
	// commit for all of them, not one each.
	var n atomic.Int64
	var wg sync.WaitGroup
	for _, r := range due {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reply, err := e.Submit(ctx, r)
			if err != nil {
				if !errors.Is(err, ErrNoSpace) { // the daemon reports low space itself; the next tick retries
					e.opts.Logger.Warn("expiry not submitted", "commandId", r.CommandID, "err", err)
				}
				return
			}
			if reply.Rejected == nil && !reply.Replayed {
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(n.Load())
}

// expiryID is the command id of an expiry: it names the delegation or the
// question, so that every tick submits the same one. An id the log would
// refuse (longer than eventlog.MaxIDLen: a run id of about 210 chars and
// more) would never be decided, and its delegation would hold its slot for
// good; such an id is named by the SHA-256 of run and object instead
// ("-sha256:" sets it apart from every readable id, whose kind is followed by ':').
func expiryID(c Command) string {
	var kind, run, object string
	switch c := c.(type) {
	case *DelegateExpire:
		kind, run, object = "expire", c.RunID, c.SubID
	case *AskExpire:
		kind, run, object = "ask-expire", c.RunID, c.QuestionID
	default:
		return ""
	}
	if id := kind + ":" + run + ":" + object; len(id) <= eventlog.MaxIDLen {
		return id
	}
	sum := sha256.Sum256([]byte(run + "\x00" + object)) // NB: a run id holds no NUL (safeID)
	return kind + "-sha256:" + hex.EncodeToString(sum[:])
}
