package wire

import (
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// countingBudget is a SpillBudget of limit bytes that refuses at once when full, and records what it was asked.
type countingBudget struct {
	mu       sync.Mutex
	limit    int
	used     int
	peak     int
	takes    int
	released int
}

func (b *countingBudget) Take(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.takes++
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return true
}

func (b *countingBudget) Release(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n <= 0 || n > b.used {
		panic("wire: released more than was taken")
	}
	b.used -= n
	b.released += n
}

// TestSpillBudget: a line longer than the read-ahead takes the bytes it spills into from the Reader's budget, chunk
// by chunk, and gives them back once when the line ends, however it ends; a line within the read-ahead takes nothing.
// A budget with no room fails the read with ErrNoRoom, FrameBytes the bytes of the line read so far.
func TestSpillBudget(t *testing.T) {
	long := object(40 << 10)
	for _, tc := range []struct {
		name   string
		input  string
		limit  int // the budget's
		frames int
		err    error
		taken  bool // anything was taken
	}{
		{"within the read-ahead", object(readAhead-1) + "\n" + object(100) + "\n", 1 << 20, 2, io.EOF, false},
		{"spilled and complete", long + "\n" + object(100) + "\n", 1 << 20, 2, io.EOF, true},
		{"spilled and truncated", long, 1 << 20, 0, ErrTruncated, true},
		{"spilled and over the cap", object(DefaultMaxFrame + 10), 1 << 20, 0, ErrFrameTooLarge, true},
		{"spilled and malformed", long[:len(long)-1] + "\n", 1 << 20, 0, ErrMalformed, true},
		{"spilled and cut by the source", long[:20<<10], 1 << 20, 0, io.ErrUnexpectedEOF, true},
		{"no room", object(100) + "\n" + long + "\n", 16 << 10, 1, ErrNoRoom, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var src io.Reader = strings.NewReader(tc.input)
			if errors.Is(tc.err, io.ErrUnexpectedEOF) {
				src = io.MultiReader(src, errReader{io.ErrUnexpectedEOF})
			}
			b := &countingBudget{limit: tc.limit}
			r := NewReader(src, DefaultMaxFrame)
			r.UseSpillBudget(b)
			frames := 0
			var err error
			for {
				var f []byte
				if f, err = r.ReadFrame(); err != nil {
					break
				}
				frames++
				require.LessOrEqual(t, len(f), len(long))
			}
			require.ErrorIs(t, err, tc.err)
			require.Equal(t, tc.frames, frames)
			require.Zero(t, b.used, "every byte taken is given back")
			require.LessOrEqual(t, b.peak, tc.limit)
			require.Equal(t, tc.taken, b.takes > 0)
			if errors.Is(err, ErrNoRoom) {
				// NB: chunks of 4, 4 and 8 KiB fill the budget; the fifth read-ahead's worth needs one more.
				require.Equal(t, 5*readAhead, r.FrameBytes(), "what the line took of the stream")
			}
			_, again := r.ReadFrame()
			require.ErrorIs(t, again, tc.err, "sticky")
			require.Zero(t, b.used)
		})
	}
}

// TestSpillBudgetHoldsTheSpill: while a line is spilled, the budget holds at least the bytes spilled, and at most the
// chunks the Reader made for them.
func TestSpillBudgetHoldsTheSpill(t *testing.T) {
	b := &countingBudget{limit: 1 << 20}
	line := object(100 << 10)
	pr, pw := io.Pipe()
	r := NewReader(pr, DefaultMaxFrame)
	r.UseSpillBudget(b)
	done := make(chan error, 1)
	go func() {
		_, err := r.ReadFrame()
		done <- err
	}()
	_, err := pw.Write([]byte(line[:60<<10]))
	require.NoError(t, err)
	// NB: the Reader has read what was written once the pipe takes more; it spills all but its read-ahead's worth.
	_, err = pw.Write([]byte(line[60<<10 : 60<<10+1]))
	require.NoError(t, err)
	b.mu.Lock()
	used := b.used
	b.mu.Unlock()
	require.GreaterOrEqual(t, used, (60<<10)-readAhead)
	require.LessOrEqual(t, used, 2*(60<<10))
	_, err = pw.Write([]byte(line[60<<10+1:] + "\n"))
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.Zero(t, b.used)
	pw.Close()
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
