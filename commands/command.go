package commands

import (
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Command is one request to change crewlog's state. The concrete types in
// this package are the only implementations: each knows how to decide
// itself against a state.
type Command interface {
	// Kind is the method name the command answers to, e.g.
	// "delegate.request".
	Kind() string
	decide(s *projections.State, env *Env) (Decision, error)
}

// Env is everything a decision depends on besides the state and the
// command. It is supplied by the caller (the engine, a test, a replay), so
// Decide stays a pure function: the same state, command and env always give
// the same decision.
type Env struct {
	// Config is the engine config in force; the engine passes the state's.
	// Replay can pass another to ask "what would this config decide".
	Config projections.Config
	// Now is the engine clock's reading, unix nanoseconds. It is recorded in
	// every event the decision makes.
	Now int64
	// NewID mints a fresh unique id (a UUID in production, a counter in
	// tests). Decisions that mint ids record them in their events.
	NewID func() string
	// Actor is the authenticated caller.
	Actor events.Actor
	// CommandID is the caller's idempotency key, recorded on every event.
	CommandID string
}

// Decision is the outcome of Decide: the events to append, in order, and
// the result fields answered to the caller on acceptance.
type Decision struct {
	Events []events.Event
	Result any
}

// Decide decides cmd against s. It does no IO and does not modify s.
//
// On acceptance it returns the events to commit and the result. On rejection
// it returns a *RejectedError; the Decision may still hold events that must
// be committed to record the rejection (delegate.requested +
// delegate.rejected), because every policy rejection leaves a trace.
func Decide(s *projections.State, cmd Command, env Env) (Decision, error) {
	return decideIn(s, cmd, &env)
}

// decideIn is Decide with the env behind a pointer the caller owns: the
// command's decide method is called through an interface, so an env it is
// handed escapes, and the writer, which decides every command, keeps one
// env for a whole group instead of allocating one per command.
func decideIn(s *projections.State, cmd Command, env *Env) (Decision, error) {
	if env.NewID == nil {
		env.NewID = func() string { return "" }
	}
	d, err := cmd.decide(s, env)
	d.Events = endWorkerLeases(s, env, d.Events)
	d, err = clipPastQuota(s, cmd, env, d, err)
	return withQuota(s, cmd, env, d, err)
}

// event builds an event of type typ on stream with the env's envelope.
func (env *Env) event(stream, typ string, payload any) events.Event {
	return events.Event{
		Stream:        stream,
		Type:          typ,
		SchemaVersion: events.SchemaVersion(typ),
		Time:          env.Now,
		CommandID:     env.CommandID,
		Actor:         env.Actor,
		Payload:       payload,
	}
}

// millis is the env clock in unix milliseconds, the unit of every time in
// payloads and read models.
func (env *Env) millis() int64 { return env.Now / 1e6 }
