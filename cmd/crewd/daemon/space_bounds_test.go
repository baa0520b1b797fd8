package daemon

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// minFreeForTest is the minimum free space of the guards below: --min-free-mib's default.
const minFreeForTest = 256 << 20

// guardReading is a space guard with minFreeForTest as its minimum, on a file system that has free bytes free.
func guardReading(t *testing.T, free uint64) *spaceGuard {
	return &spaceGuard{dir: t.TempDir(), min: minFreeForTest, lg: discard(), now: time.Now,
		readFree: func(string) (uint64, error) { return free, nil }}
}

// TestSpaceGuardMinimumIsFreeSpaceAllowed: writes are refused while the free space is less than the minimum
// (docs/protocol.md, "Full disk"); exactly the minimum free is still enough.
func TestSpaceGuardMinimumIsFreeSpaceAllowed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		free   uint64
		refuse bool
	}{
		{"a byte below the minimum", minFreeForTest - 1, true},
		{"exactly the minimum", minFreeForTest, false},
		{"a byte above the minimum", minFreeForTest + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := guardReading(t, tc.free).CheckSpace()
			if tc.refuse {
				require.ErrorContains(t, err, "below the minimum of 256 MiB")
			} else {
				require.NoError(t, err)
			}
		})
	}
}

// TestSpaceGuardRoomForAWrite: a write of known size (a snapshot) is allowed when it leaves at least the minimum
// free, exactly the minimum included, and refused a byte beyond, its size named in MiB rounded up.
func TestSpaceGuardRoomForAWrite(t *testing.T) {
	const room = 10 << 20 // free above the minimum
	for _, tc := range []struct {
		name string
		free uint64
		size uint64
		want string // "" when the write is allowed
	}{
		{"nothing written at the minimum", minFreeForTest, 0, ""},
		{"nothing written below the minimum", minFreeForTest - 1, 0, "too little for a write of 0 MiB"},
		{"a write that leaves the minimum", minFreeForTest + room, room, ""},
		{"a write a byte larger", minFreeForTest + room, room + 1, "too little for a write of 11 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := guardReading(t, tc.free).CheckSpaceFor(tc.size)
			if tc.want == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.want)
			}
		})
	}
}
