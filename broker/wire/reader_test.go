package wire

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// object returns a JSON object of exactly n bytes (n ≥ 8).
func object(n int) string { return `{"a":"` + strings.Repeat("x", n-8) + `"}` }

// readAll reads frames until an error and returns them with that error.
func readAll(src io.Reader, maxFrame int) ([]string, error) {
	return readFrames(NewReader(src, maxFrame))
}

// readFrames reads r's frames until an error and returns them with that error.
func readFrames(r *Reader) ([]string, error) {
	var frames []string
	for {
		f, err := r.ReadFrame()
		if err != nil {
			return frames, err
		}
		frames = append(frames, string(f))
	}
}

// splits feeds the same input whole, in two halves and one byte at a time; the Reader must not care.
var splits = map[string]func([]byte) io.Reader{
	"whole": func(b []byte) io.Reader { return bytes.NewReader(b) },
	"halves": func(b []byte) io.Reader {
		return io.MultiReader(bytes.NewReader(b[:len(b)/2]), bytes.NewReader(b[len(b)/2:]))
	},
	"one byte": func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
}

func TestReadFrame(t *testing.T) {
	const limit = MaxFrameFloor
	for _, tc := range []struct {
		name   string
		input  string
		frames []string
		err    error
	}{
		{"empty stream", "", nil, io.EOF},
		{"one frame", "{}\n", []string{"{}"}, io.EOF},
		{"several frames", `{"id":"1"}` + "\n" + `{"id":"2"}` + "\n", []string{`{"id":"1"}`, `{"id":"2"}`}, io.EOF},
		{"crlf", "{\"a\":1}\r\n{}\r\n", []string{`{"a":1}`, `{}`}, io.EOF},
		{"blank lines skipped", "\n\r\n  \t\n{}\n\n", []string{"{}"}, io.EOF},
		{"surrounding space kept", " {} \n", []string{" {} "}, io.EOF},
		{"truncated", "{}\n{\"a\":", []string{"{}"}, ErrTruncated},
		{"truncated complete object", "{}", nil, ErrTruncated},
		{"trailing blanks at end", "{}\n  \r", []string{"{}"}, io.EOF},
		{"invalid json", "{}\n{\"a\":}\n{}\n", []string{"{}"}, ErrMalformed},
		{"two objects on a line", "{}{}\n", nil, ErrMalformed},
		{"array", "[1]\n", nil, ErrMalformed},
		{"string", "\"x\"\n", nil, ErrMalformed},
		{"null", "null\n", nil, ErrMalformed},
		{"invalid utf-8", "{\"a\":\"\xff\"}\n", nil, ErrMalformed},
		{"utf-8 multibyte", "{\"a\":\"é😀\"}\n", []string{"{\"a\":\"é😀\"}"}, io.EOF},
		{"lone cr inside is not a newline", "{}\r{}\n", nil, ErrMalformed},
		{"frame of exactly the cap", object(limit-1) + "\n", []string{object(limit - 1)}, io.EOF},
		{"crlf frame of exactly the cap", object(limit-2) + "\r\n", []string{object(limit - 2)}, io.EOF},
		{"frame one over the cap", object(limit) + "\n{}\n", nil, ErrFrameTooLarge},
		{"unterminated line over the cap", object(limit), nil, ErrFrameTooLarge},
		{"blank line over the cap", strings.Repeat(" ", limit) + "\n", nil, ErrFrameTooLarge},
		{"blank lines over the cap", strings.Repeat("\n", limit) + "{}\n", nil, ErrFrameTooLarge},
		{"blank lines and a frame over the cap", strings.Repeat("\n", 8) + object(limit-8) + "\n", nil, ErrFrameTooLarge},
		{"blank lines and a frame of exactly the cap", strings.Repeat(" \n", 4) + object(limit-9) + "\n",
			[]string{object(limit - 9)}, io.EOF},
		{"blank lines count toward the next frame only", "{}\n" + strings.Repeat("\n", limit-3) + "{}\n" +
			strings.Repeat("\n", limit-3) + "{}\n", []string{"{}", "{}", "{}"}, io.EOF},
		{"big frame after small ones", "{}\n" + object(limit-1) + "\n{}\n", []string{"{}", object(limit - 1), "{}"}, io.EOF},
	} {
		for name, split := range splits {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				frames, err := readAll(split([]byte(tc.input)), limit)
				require.Equal(t, tc.frames, frames)
				require.ErrorIs(t, err, tc.err)
			})
		}
	}
}

func TestReadFrameDefaultCap(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int // bytes before the newline
		err  error
	}{
		{"exactly the cap", DefaultMaxFrame - 1, io.EOF},
		{"one over the cap", DefaultMaxFrame, ErrFrameTooLarge},
		{"300 KiB", 300 << 10, ErrFrameTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frames, err := readAll(strings.NewReader(object(tc.size)+"\n"), 0)
			require.ErrorIs(t, err, tc.err)
			if tc.err == io.EOF {
				require.Equal(t, []string{object(tc.size)}, frames)
			}
		})
	}
}

// endless yields a prefix and then the same byte forever, counting what it hands out.
type endless struct {
	prefix string
	fill   byte
	n      int
	max    int // when not 0, the stream fails once this many bytes were read
}

var errEndlessEnded = errors.New("the endless stream ended")

func (e *endless) Read(p []byte) (int, error) {
	if e.max > 0 && e.n >= e.max {
		return 0, errEndlessEnded
	}
	k := copy(p, e.prefix)
	e.prefix = e.prefix[k:]
	for i := k; i < len(p); i++ {
		p[i] = e.fill
	}
	e.n += len(p)
	return len(p), nil
}

// A peer's endless line must be refused after at most one frame and one read-ahead of input, holding no more than
// one frame's worth of memory: a 300 KiB (or infinite) line never costs 300 KiB.
func TestReadFrameStopsEarly(t *testing.T) {
	for _, limit := range []int{MaxFrameFloor, DefaultMaxFrame, MaxFrameCeiling} {
		for name, wrap := range map[string]func(io.Reader) io.Reader{
			"whole":    func(r io.Reader) io.Reader { return r },
			"one byte": iotest.OneByteReader,
		} {
			t.Run(name+"/"+strconv.Itoa(limit), func(t *testing.T) {
				src := &endless{prefix: `{"a":"`, fill: 'x'}
				r := NewReader(wrap(src), limit)
				spilled := &countingBudget{limit: 2 * limit}
				r.UseSpillBudget(spilled)

				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				_, err := r.ReadFrame()
				runtime.ReadMemStats(&after)

				require.ErrorIs(t, err, ErrFrameTooLarge)
				require.LessOrEqual(t, src.n, limit+readAhead, "read past the cap")
				require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(limit+32<<10), "allocated more than a frame")
				// NB: the chunks, not r.cspill, which the refusal has reset: what the line held at its longest.
				require.LessOrEqual(t, spilled.peak, limit-1, "the chunks of a refused line add up to more than a frame")
				require.Zero(t, spilled.used, "the refused line's chunks are given back")

				// Sticky: nothing more is read.
				n := src.n
				_, err = r.ReadFrame()
				require.ErrorIs(t, err, ErrFrameTooLarge)
				require.Equal(t, n, src.n)
			})
		}
	}
}

// The cap must be enforced on an oversize line of blanks too: blank lines are only skipped once they are complete.
// And on endless blank lines: they count toward the frame after them, so a peer cannot keep the reader busy
// skipping them without ever delivering a frame.
func TestReadFrameEndlessBlanks(t *testing.T) {
	for _, fill := range []byte{' ', '\n'} {
		// NB: not quite endless, so that a reader that skips blank lines for ever fails the test rather than hang it.
		src := &endless{fill: fill, max: 64 * MaxFrameFloor}
		_, err := NewReader(src, MaxFrameFloor).ReadFrame()
		require.ErrorIs(t, err, ErrFrameTooLarge, "%q", fill)
		require.LessOrEqual(t, src.n, MaxFrameFloor+readAhead, "%q", fill)
	}
}

// FrameBytes is what the last frame took of the stream: the blank lines before it, the frame and its line end.
func TestReadFrameBytes(t *testing.T) {
	r := NewReader(strings.NewReader("{}\n\n \r\n{\"a\":1}\r\n"), 0)
	for _, want := range []int{3, 4 + 9} {
		_, err := r.ReadFrame()
		require.NoError(t, err)
		require.Equal(t, want, r.FrameBytes())
	}
}

// TestRefusedFrameBytes: after a line refused, FrameBytes is what it took of the stream, the blank lines before it
// included, or the cap for a line over it, so that a reader that charges its peer by bytes charges a refused line
// too. Until it was, FrameBytes kept the last accepted frame's (0 for a connection's first line), and it still did
// for a line the stream ended in, for one a source's error (a reset) cut off, and for the blank lines the stream
// ended with, which it now is too.
func TestRefusedFrameBytes(t *testing.T) {
	for name, tc := range map[string]struct {
		stream string
		end    error // the source's error after the stream; nil: an end of file
		limit  int
		err    error
		want   int
	}{
		"malformed":    {"\n" + `{"a":` + "\n", nil, 1024, ErrMalformed, 1 + 6},
		"over the cap": {"\n" + object(2000) + "\n", nil, 1024, ErrFrameTooLarge, 1024},
		"truncated":    {"\n" + `{"a":1`, nil, 1024, ErrTruncated, 1 + 6},
		// NB: longer than the read-ahead, so that the line is spilled before the stream ends.
		"truncated, longer than the read-ahead": {"\n" + object(10000)[:9999], nil, 16 << 10, ErrTruncated, 1 + 9999},
		// NB: a unix socket's peer that closes with bytes of ours unread ends the stream so, after its last byte.
		"truncated by a reset": {"\n" + `{"a":1`, syscall.ECONNRESET, 1024, ErrTruncated, 1 + 6},
		// The blank lines the stream ends with, which no frame follows.
		"blank lines at the end":            {"\n \r\n\t", nil, 1024, io.EOF, 5},
		"blank lines at the end of a reset": {"\n \r\n\t", syscall.ECONNRESET, 1024, syscall.ECONNRESET, 5},
	} {
		t.Run(name, func(t *testing.T) {
			src := io.Reader(strings.NewReader(tc.stream))
			if tc.end != nil {
				src = io.MultiReader(src, iotest.ErrReader(tc.end))
			}
			r := NewReader(src, tc.limit)
			_, err := r.ReadFrame()
			require.ErrorIs(t, err, tc.err)
			if tc.end != nil {
				require.ErrorIs(t, err, tc.end, "the source's error")
			}
			if tc.err != ErrTruncated {
				require.NotErrorIs(t, err, ErrTruncated)
			}
			require.Equal(t, tc.want, r.FrameBytes())
		})
	}
}

// repeat yields the same frame forever.
type repeat struct {
	frame string
	off   int
}

func (r *repeat) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := copy(p[n:], r.frame[r.off:])
		r.off = (r.off + k) % len(r.frame)
		n += k
	}
	return n, nil
}

// Frames that fit the read-ahead are returned in place: the steady state of a connection allocates nothing.
func TestReadFrameAllocs(t *testing.T) {
	r := NewReader(&repeat{frame: `{"id":"1","method":"ping","params":{}}` + "\n"}, 0)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := r.ReadFrame(); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}

// A request read in place allocates its id only (its method is the last one's, its params the frame's), where
// ReadRequest copies its params too; ReadRequest's params are its own, and in place they are the frame's until the
// next read.
func TestReadRequestInPlaceAllocs(t *testing.T) {
	const line = `{"id":"r-17","method":"delegate.request","params":{"prompt":"p","commandId":"c-1"}}` + "\n"
	for _, tc := range []struct {
		name   string
		read   func(*Reader) (Request, error)
		allocs float64
	}{
		{"ReadRequest", (*Reader).ReadRequest, 2},
		{"ReadRequestInPlace", (*Reader).ReadRequestInPlace, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(&repeat{frame: line}, 0)
			allocs := testing.AllocsPerRun(1000, func() {
				if _, err := tc.read(r); err != nil {
					t.Fatal(err)
				}
			})
			require.Equal(t, tc.allocs, allocs)
		})
	}
	src := []byte(line + strings.Replace(line, `"p"`, `"q"`, 1))
	r := NewReader(bytes.NewReader(src), 0)
	owned, err := r.ReadRequest()
	require.NoError(t, err)
	inPlace, err := r.ReadRequestInPlace()
	require.NoError(t, err)
	require.Equal(t, `{"prompt":"q","commandId":"c-1"}`, string(inPlace.Params))
	for i := range src {
		src[i] = ' ' // what the source handed the reader is no request's
	}
	r.buf[r.end-len(line)+len(`{"id":"r-17","method":"delegate.request","params":{"prompt":"`)] = 'z' // its next use
	require.Equal(t, `{"prompt":"p","commandId":"c-1"}`, string(owned.Params), "ReadRequest's params are their own")
	require.Equal(t, `{"prompt":"z","commandId":"c-1"}`, string(inPlace.Params), "in place, they are the frame's")
}

func TestReadFrameSourceError(t *testing.T) {
	boom := errors.New("boom")
	frames, err := readAll(io.MultiReader(strings.NewReader("{}\n{\"a\""), iotest.ErrReader(boom)), 0)
	require.Equal(t, []string{"{}"}, frames)
	require.ErrorIs(t, err, boom)
	require.ErrorIs(t, err, ErrTruncated, "the error cut a line")
	require.EqualError(t, err, "wire: read frame: boom (wire: truncated frame)")

	// Data delivered together with the error is still read.
	frames, err = readAll(iotest.DataErrReader(strings.NewReader("{}\n{}\n")), 0)
	require.Equal(t, []string{"{}", "{}"}, frames)
	require.ErrorIs(t, err, io.EOF)
}

type stuck struct{}

func (stuck) Read([]byte) (int, error) { return 0, nil }

func TestReadFrameNoProgress(t *testing.T) {
	_, err := NewReader(stuck{}, 0).ReadFrame()
	require.ErrorIs(t, err, io.ErrNoProgress)
}

func TestReadFrameErrorsAreSticky(t *testing.T) {
	r := NewReader(strings.NewReader("[]\n{}\n"), 0)
	_, err := r.ReadFrame()
	require.ErrorIs(t, err, ErrMalformed)
	_, err2 := r.ReadFrame()
	require.Equal(t, err, err2)
}

func TestNewReaderCap(t *testing.T) {
	require.PanicsWithError(t, "wire: max frame 100 bytes is outside 1024..1048576", func() {
		NewReader(strings.NewReader(""), 100)
	})
	require.Equal(t, DefaultMaxFrame, NewReader(strings.NewReader(""), 0).limit)
}
