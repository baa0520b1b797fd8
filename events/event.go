package events

// Event is one decoded event: the envelope fields the projections and the
// commands use, plus the payload.
//
// Concurrency: an Event is a value; once handed to projections its Payload
// must be treated as immutable, because the folded state may keep references
// to payload slices (dependsOn, options, modelCatalog) instead of copying them.
type Event struct {
	Position      uint64 // global, gapless from 1 (0 while not yet committed)
	Stream        string // the run id (EngineStream for engine.configured)
	StreamVersion uint64
	Type          string
	SchemaVersion uint16
	Time          int64 // unix nanoseconds, engine clock
	CommandID     string
	CausationID   string
	CorrelationID string
	Actor         Actor
	Payload       any // pointer to the payload struct of Type
}

// Actor is who caused an event: the authenticated role and, for workers, the
// task the credential is scoped to.
type Actor struct {
	Role   string `json:"role" msgpack:"role"`
	TaskID string `json:"taskId,omitempty" msgpack:"taskId,omitempty"`
}

// String is how crewlog names an actor: role/task, or the role alone when
// the task adds nothing (none, or the role itself), "-" for no role. The
// audit trail, crewctl and the credentials' read model (who issued and
// revoked each) all name actors by it, so they name them alike.
func (a Actor) String() string {
	if a.TaskID == "" || a.TaskID == a.Role {
		if a.Role == "" {
			return "-"
		}
		return a.Role
	}
	return a.Role + "/" + a.TaskID
}

// Actor roles.
const (
	RoleWorker       = "worker"
	RoleOrchestrator = "orchestrator"
	RoleAdmin        = "admin"
	RoleEngine       = "engine" // the engine itself, e.g. an expiry driven by its clock
)

// EngineStream is the stream of events that belong to the daemon rather than
// to a run (engine.configured). Run ids are limited to [A-Za-z0-9_-], so it
// cannot collide with one.
const EngineStream = "$engine"

// UnixMilli converts the event time (unix nanoseconds) to the unix
// milliseconds used by every timestamp inside payloads and read models.
func (e Event) UnixMilli() int64 { return e.Time / 1e6 }

// PayloadAs returns ev's payload as a *T, accepting a T too; nil when the
// payload is of another type. Folds and describers read payloads with it
// instead of a type switch each.
func PayloadAs[T any](ev Event) *T {
	switch p := ev.Payload.(type) {
	case *T:
		return p
	case T:
		return &p
	}
	return nil
}
