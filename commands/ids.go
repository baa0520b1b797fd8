package commands

import (
	"strings"
	"time"
)

// MaxIDChars bounds run, task and message ids.
const MaxIDChars = 256

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

// newRunID mints pi-crew's run id shape, team_<YYYYMMDDhhmmss>_<16 hex>,
// from the env's clock and id source.
func newRunID(env *Env) string {
	hex := strings.ReplaceAll(env.NewID(), "-", "")
	if len(hex) > 16 {
		hex = hex[:16]
	}
	return "team_" + time.Unix(0, env.Now).UTC().Format("20060102150405") + "_" + hex
}
