package commands

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestUUIDSourceMintsRandomUUIDs: every id is a canonical version-4 UUID
// of RFC 4122's variant, as uuid.NewString's, and none repeats across
// several refills of the pool.
func TestUUIDSourceMintsRandomUUIDs(t *testing.T) {
	src := newUUIDSource()
	seen := make(map[string]bool)
	for range 3 * len(src.pool) / 16 {
		id := src.NewString()
		u, err := uuid.Parse(id)
		require.NoError(t, err)
		require.Equal(t, u.String(), id)
		require.Equal(t, uuid.Version(4), u.Version())
		require.Equal(t, uuid.RFC4122, u.Variant())
		require.False(t, seen[id], "%s minted twice", id)
		seen[id] = true
	}
}
