package events

import (
	"encoding/binary"
	"math/bits"
	"strings"
)

// Principal is whose a command id is (SPEC §2 "Whose id it is"): the
// admin; the orchestrator of one run; a worker of one task of one run; or
// the engine itself (clock expiries, config, migrations, imports). Two
// principals' command ids never meet: the recorded outcome of a command is
// keyed by its principal's Key and the id.
//
// A client's principal is its authenticated identity, never anything it
// sends; no identity maps to the engine, so the engine's ids are out of
// every client's reach whatever it names them.
type Principal struct {
	Role   string // RoleAdmin, RoleOrchestrator, RoleWorker or RoleEngine
	RunID  string // orchestrator and worker
	TaskID string // worker
}

// Principals of the four kinds.
func AdminPrincipal() Principal  { return Principal{Role: RoleAdmin} }
func EnginePrincipal() Principal { return Principal{Role: RoleEngine} }
func OrchestratorPrincipal(run string) Principal {
	return Principal{Role: RoleOrchestrator, RunID: run}
}
func WorkerPrincipal(run, task string) Principal {
	return Principal{Role: RoleWorker, RunID: run, TaskID: task}
}

// Principal role bytes: the first byte of a Key.
const (
	principalAdmin        = 'a'
	principalEngine       = 'e'
	principalOrchestrator = 'o'
	principalWorker       = 'w'
)

// Key is the canonical, unambiguous encoding of p, the bytes the outcome
// table is keyed by:
//
//	admin         'a'
//	engine        'e'
//	orchestrator  'o' | uvarint len | run
//	worker        'w' | uvarint len | run | uvarint len | task
//
// Run and task ids may hold any byte, so every field is length-prefixed:
// no two principals share a Key. The zero Principal (and any unknown role)
// has the empty Key, which no caller may record an outcome under.
func (p Principal) Key() string {
	switch p.Role {
	case RoleAdmin:
		return string(rune(principalAdmin))
	case RoleEngine:
		return string(rune(principalEngine))
	}
	return string(p.AppendKey(make([]byte, 0, 1+2*binary.MaxVarintLen16+len(p.RunID)+len(p.TaskID))))
}

// AppendKey appends p's Key to b: what Key returns, without a string of
// its own for a caller that only hashes or compares it.
func (p Principal) AppendKey(b []byte) []byte {
	switch p.Role {
	case RoleAdmin:
		return append(b, principalAdmin)
	case RoleEngine:
		return append(b, principalEngine)
	case RoleOrchestrator:
		return appendField(append(b, principalOrchestrator), p.RunID)
	case RoleWorker:
		return appendField(appendField(append(b, principalWorker), p.RunID), p.TaskID)
	}
	return b
}

func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// ParsePrincipalKey is Key's inverse; ok is false for bytes Key never
// produces.
func ParsePrincipalKey(k string) (p Principal, ok bool) {
	if k == "" {
		return Principal{}, false
	}
	rest := k[1:]
	field := func() (string, bool) {
		n, w := binary.Uvarint([]byte(rest[:min(len(rest), binary.MaxVarintLen64)]))
		// NB: only appendField's encoding of the length, the shortest: 0x80 0x00 for 0 is a key Key never gives.
		if w <= 0 || w != (bits.Len64(n|1)+6)/7 || uint64(len(rest)-w) < n {
			return "", false
		}
		s := rest[w : w+int(n)]
		rest = rest[w+int(n):]
		return s, true
	}
	switch k[0] {
	case principalAdmin:
		return AdminPrincipal(), rest == ""
	case principalEngine:
		return EnginePrincipal(), rest == ""
	case principalOrchestrator:
		run, ok := field()
		return OrchestratorPrincipal(run), ok && rest == ""
	case principalWorker:
		run, ok1 := field()
		task, ok2 := field()
		return WorkerPrincipal(run, task), ok1 && ok2 && rest == ""
	}
	return Principal{}, false
}

// ImportCorrelation prefixes the correlation id of every event an import
// writes (pi-crew's history, say): the import is the engine's command.
const ImportCorrelation = "import:"

// EventPrincipal is the principal whose command wrote an event with this
// envelope. Commands stamp every event with their caller's actor, and a
// run's orchestrator and workers act only in their run's stream, so the
// envelope determines the principal:
//
//   - actor engine, or a correlation id starting with ImportCorrelation
//     (imports recorded their events as the admin before the engine had a
//     namespace of its own) → the engine;
//   - actor orchestrator → the orchestrator of the event's stream;
//   - actor worker → the worker of the actor's task in the event's stream;
//   - anything else (the admin) → the admin.
//
// crewlog verify checks every recorded outcome against it, and the step to
// store format 3 used it to move each outcome to its principal.
func EventPrincipal(actorRole, stream, actorTask, correlationID string) Principal {
	switch {
	case actorRole == RoleEngine || strings.HasPrefix(correlationID, ImportCorrelation):
		return EnginePrincipal()
	case actorRole == RoleOrchestrator:
		return OrchestratorPrincipal(stream)
	case actorRole == RoleWorker:
		return WorkerPrincipal(stream, actorTask)
	}
	return AdminPrincipal()
}

// Actor is the actor a principal's events are stamped with.
func (p Principal) Actor() Actor {
	if p.Role == RoleWorker {
		return Actor{Role: p.Role, TaskID: p.TaskID}
	}
	return Actor{Role: p.Role}
}
