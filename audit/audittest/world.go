package audittest

import (
	"fmt"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// World writes a log without the engine: it decides commands with
// commands.Decide against its own fold and appends the events with
// eventlog.Append, either one command per append (Do) or buffered into large
// appends (Buffer + Flush), which is how the benchmark log is built fast.
// Append lets a test also write events no decision would make (Raw), which is
// how a policy-drift log is made.
//
// Concurrency: one goroutine.
type World struct {
	Log   *eventlog.Log
	State *projections.State
	Now   int64 // unix ns; every decision advances it by Step
	Step  int64
	// NoCommandIDs decides and writes the commands as sent without a command id, which is optional: their events
	// carry none, and are grouped into decisions by their stream and clock reading.
	NoCommandIDs bool

	ids      int
	cmds     int
	next     uint64 // position the next appended event gets
	buffered []eventlog.Write
}

// NewWorld starts a world on an open, empty, writable log.
func NewWorld(l *eventlog.Log, now int64) *World {
	head, _ := l.Head()
	return &World{Log: l, State: projections.New(), Now: now, Step: 1e9, next: head + 1}
}

// NewID is the id source of every decision: a counter, so subIds read
// gc-00000001.
func (w *World) NewID() string {
	w.ids++
	return fmt.Sprintf("%08d", w.ids)
}

// Do decides cmd as actor and appends its events at once. A rejection is
// returned, after its recorded events (if any) were appended.
func (w *World) Do(actor events.Actor, cmd commands.Command) (commands.Decision, error) {
	d, err := w.Buffer(actor, cmd)
	if ferr := w.Flush(); ferr != nil {
		return d, ferr
	}
	return d, err
}

// Buffer decides cmd as actor, folds its events and keeps them for the next
// Flush. A decision the policy rejected returns its *commands.RejectedError;
// its events (delegate.requested + delegate.rejected) are kept all the same.
func (w *World) Buffer(actor events.Actor, cmd commands.Command) (commands.Decision, error) {
	w.cmds++
	w.Now += w.Step
	id := fmt.Sprintf("cmd-%07d", w.cmds)
	if w.NoCommandIDs {
		id = ""
	}
	env := commands.Env{Config: w.State.Config(), Now: w.Now, NewID: w.NewID, Actor: actor, CommandID: id}
	d, err := commands.Decide(w.State, cmd, env)
	if len(d.Events) == 0 {
		return d, err
	}
	if perr := w.stage(id, d.Events); perr != nil {
		return d, perr
	}
	return d, err
}

// Raw folds and keeps hand-made events as one write, stamped with the
// world's clock when they carry no time.
func (w *World) Raw(evs ...events.Event) error {
	w.cmds++
	w.Now += w.Step
	id := fmt.Sprintf("raw-%07d", w.cmds)
	for i := range evs {
		if evs[i].Time == 0 {
			evs[i].Time = w.Now
		}
		if evs[i].SchemaVersion == 0 {
			evs[i].SchemaVersion = events.SchemaVersion(evs[i].Type)
		}
		evs[i].CommandID = id
	}
	return w.stage(id, evs)
}

func (w *World) stage(id string, evs []events.Event) error {
	wr := eventlog.Write{CommandID: id, Events: make([]eventlog.Event, len(evs))}
	if len(evs) > 0 {
		a := evs[0].Actor
		wr.Principal = events.EventPrincipal(a.Role, evs[0].Stream, a.TaskID, evs[0].CorrelationID).Key()
	}
	for i := range evs {
		p, err := events.EncodePayload(evs[i].Payload)
		if err != nil {
			return fmt.Errorf("audittest: encode %s: %w", evs[i].Type, err)
		}
		e := evs[i]
		wr.Events[i] = eventlog.Event{
			Stream: e.Stream, Type: e.Type, SchemaVersion: e.SchemaVersion, Time: e.Time, CommandID: id,
			CausationID: e.CausationID, CorrelationID: e.CorrelationID, ActorRole: e.Actor.Role,
			ActorTask: e.Actor.TaskID, Payload: p,
		}
		evs[i].Position = w.next
		w.next++
		projections.Apply(w.State, evs[i])
	}
	w.buffered = append(w.buffered, wr)
	return nil
}

// Buffered is the number of events waiting for Flush.
func (w *World) Buffered() int {
	n := 0
	for _, wr := range w.buffered {
		n += len(wr.Events)
	}
	return n
}

// Flush appends everything buffered in one synced append.
func (w *World) Flush() error {
	if len(w.buffered) == 0 {
		return nil
	}
	_, err := w.Log.Append(w.buffered...)
	w.buffered = w.buffered[:0]
	if err != nil {
		return fmt.Errorf("audittest: append: %w", err)
	}
	return nil
}

// Actors used by the generators.
var (
	Admin        = events.Actor{Role: events.RoleAdmin}
	Orchestrator = events.Actor{Role: events.RoleOrchestrator, TaskID: events.OrchestratorKey}
)

// Worker is the actor of a worker scoped to task.
func Worker(task string) events.Actor { return events.Actor{Role: events.RoleWorker, TaskID: task} }

// Ptr returns a pointer to v: optional command params are pointers.
func Ptr[T any](v T) *T { return &v }
