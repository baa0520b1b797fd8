package commands

import (
	"crypto/rand"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// MaxIDChars bounds task and message ids (run ids: MaxRunIDChars).
const MaxIDChars = events.MaxIDChars

// safeID reports whether id is 1..MaxIDChars of [A-Za-z0-9_-] (pi-crew's
// safe-path charset, D§1), so ids can name files and never collide with
// the engine's own stream.
func safeID(id string) bool {
	if id == "" || len(id) > MaxIDChars {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// MaxRunIDChars bounds run ids: a run id names the run's stream, which the
// log bounds.
const MaxRunIDChars = eventlog.MaxStreamLen

// safeRunID is safeID for a run id.
func safeRunID(id string) bool { return safeID(id) && len(id) <= MaxRunIDChars }

// newRunID mints pi-crew's run id shape, team_<YYYYMMDDhhmmss>_<16 hex>,
// from the env's clock and id source.
func newRunID(env *Env) string {
	hex := strings.ReplaceAll(env.NewID(), "-", "")
	if len(hex) > 16 {
		hex = hex[:16]
	}
	return "team_" + time.Unix(0, env.Now).UTC().Format("20060102150405") + "_" + hex
}

// uuidSource mints random (version 4) UUIDs as uuid.NewString does, from
// crypto/rand read 4 KiB at a time instead of 16 bytes per id: the engine
// mints two ids per admission, and each read was a call into the kernel's
// random source, plus two allocations.
type uuidSource struct {
	mu   sync.Mutex
	pool [4096]byte
	off  int
}

func newUUIDSource() *uuidSource { return &uuidSource{off: 4096} }

// NewString returns a new random UUID in its canonical text form.
func (s *uuidSource) NewString() string {
	var u uuid.UUID
	s.mu.Lock()
	if s.off == len(s.pool) {
		_, _ = rand.Read(s.pool[:]) // NB: never fails (Go ≥ 1.24 crashes the process instead)
		s.off = 0
	}
	copy(u[:], s.pool[s.off:])
	clear(s.pool[s.off : s.off+len(u)]) // what was handed out is not kept
	s.off += len(u)
	s.mu.Unlock()
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // variant RFC 4122
	return u.String()
}
