package events

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// impossibleCheckpoints are checkpoints no import writes: each must be refused at decode.
func impossibleCheckpoints() map[string]ImportCheckpoint {
	ok := ImportCheckpoint{Source: ForeignSourcePicrew, Path: "state/runs/r/events.jsonl", Inode: 7, Size: 40,
		Offset: 40, Lines: 2}
	with := func(f func(*ImportCheckpoint)) ImportCheckpoint { c := ok; f(&c); return c }
	return map[string]ImportCheckpoint{
		"negative offset":       with(func(c *ImportCheckpoint) { c.Offset = -1 }),
		"most negative offset":  with(func(c *ImportCheckpoint) { c.Offset = -1 << 63 }),
		"negative size":         with(func(c *ImportCheckpoint) { c.Size = -40 }),
		"negative line count":   with(func(c *ImportCheckpoint) { c.Lines = -1 }),
		"more lines than bytes": with(func(c *ImportCheckpoint) { c.Lines = 41 }),
	}
}

// TestImportCheckpointRefusedAtDecode: a follower resumes reading a file at a checkpoint's offset, so a checkpoint
// no import writes is refused where it is decoded (ErrBadPayload, with what is wrong), by the generated decoder and
// by reflection alike, rather than handed to the follower.
func TestImportCheckpointRefusedAtDecode(t *testing.T) {
	for name, c := range impossibleCheckpoints() {
		t.Run(name, func(t *testing.T) {
			require.Error(t, c.Validate())
			b, err := EncodePayload(&c)
			require.NoError(t, err)
			p, err := DecodePayload(TypeImportCheckpoint, 1, b)
			require.ErrorIs(t, err, ErrBadPayload)
			require.ErrorContains(t, err, c.Validate().Error())
			require.Nil(t, p)
			p, err = NewDecoder().Decode(TypeImportCheckpoint, 1, b)
			require.ErrorIs(t, err, ErrBadPayload)
			require.Nil(t, p)
		})
	}
	t.Run("by reflection", func(t *testing.T) {
		// offset twice (the last wins): the generated decoder leaves a duplicate key to reflection.
		b := []byte{0x82, 0xa6, 'o', 'f', 'f', 's', 'e', 't', 0x05, 0xa6, 'o', 'f', 'f', 's', 'e', 't', 0xff}
		_, st := decodeFast(TypeImportCheckpoint, 1, b, nil)
		require.Equal(t, fastFallback, st)
		_, err := DecodePayload(TypeImportCheckpoint, 1, b)
		require.ErrorIs(t, err, ErrBadPayload)
		require.ErrorContains(t, err, "offset -1 is negative")
	})
}

func TestImportCheckpointPossible(t *testing.T) {
	for name, c := range map[string]ImportCheckpoint{
		"nothing read":            {Path: "a"},
		"a whole file":            {Path: "a", Size: 10, Offset: 10, LastLineHash: "h"},
		"grown before it is read": {Path: "a", Size: 10, Offset: 25, Lines: 3},
		"a long line skipped":     {Path: "a", Size: 1 << 30, Offset: 4 << 20},
		"one byte a line":         {Path: "a", Size: 3, Offset: 3, Lines: 3},
	} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, c.Validate())
			b, err := EncodePayload(&c)
			require.NoError(t, err)
			p, err := DecodePayload(TypeImportCheckpoint, 1, b)
			require.NoError(t, err)
			require.Equal(t, &c, p)
		})
	}
}
