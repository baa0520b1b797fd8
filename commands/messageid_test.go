package commands

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// messageIDBySprintf is how message ids were minted before messageID built
// them in one buffer: the shape recorded in every log written since.
func messageIDBySprintf(env *Env) string {
	id := env.NewID()
	suffix := ""
	for _, r := range id {
		if (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') {
			suffix += string(r)
			if len(suffix) == 12 {
				break
			}
		}
	}
	return fmt.Sprintf("msg_%s_%s", strconv.FormatInt(env.millis(), 36), suffix)
}

// A message id is the same whichever way it is built, for UUIDs, counters,
// short, upper-case and non-ASCII ids, and any clock reading.
func TestMessageIDShape(t *testing.T) {
	ids := []string{
		"8f14e45f-ceea-467f-a9f3-6e1b2c3d4e5f", "id-7", "", "ABC-def-123", "ÿé-日本-abc0123456789xyz",
		"zzzzzzzzzzzzzzzzzzzz", "0",
	}
	for _, now := range []int64{0, 1_700_000_000_123_456_789, -5_000_000} {
		for _, id := range ids {
			env := &Env{Now: now, NewID: func() string { return id }}
			require.Equal(t, messageIDBySprintf(env), messageID(env), "id %q at %d", id, now)
		}
	}
}
