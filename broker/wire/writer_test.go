package wire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAppendFrame(t *testing.T) {
	const limit = MaxFrameFloor
	prefix := []byte("earlier\n")
	for _, tc := range []struct {
		name string
		v    any
		want string // frame without the newline; "" when refused
		err  error  // matched with ErrorIs when not nil
		msg  string // error text otherwise
	}{
		{"object", map[string]int{"a": 1}, `{"a":1}`, nil, ""},
		{"exactly the cap", rawObject(limit - 1), object(limit - 1), nil, ""},
		{"one over the cap", rawObject(limit), "", ErrFrameTooLarge, ""},
		{"newline in a string is escaped", map[string]string{"s": "a\nb"}, `{"s":"a\nb"}`, nil, ""},
		{"no html escaping", map[string]string{"s": "<&>"}, `{"s":"<&>"}`, nil, ""},
		{"not an object", []int{1}, "", nil, "wire: encode frame: not a JSON object"},
		{"nil", nil, "", nil, "wire: encode frame: not a JSON object"},
		{"unencodable", map[string]any{"c": make(chan int)}, "", nil,
			"wire: encode frame: json: unsupported type: chan int"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := append([]byte(nil), prefix...)
			out, err := AppendFrame(dst, tc.v, limit)
			if tc.want != "" {
				require.NoError(t, err)
				require.Equal(t, string(prefix)+tc.want+"\n", string(out))
				return
			}
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
			} else {
				require.EqualError(t, err, tc.msg)
			}
			require.Equal(t, string(prefix), string(out), "dst must come back unchanged")
		})
	}
}

func TestAppendFrameBadCap(t *testing.T) {
	out, err := AppendFrame([]byte("x"), map[string]int{}, 10)
	require.EqualError(t, err, "wire: max frame 10 bytes is outside 1024..1048576")
	require.Equal(t, "x", string(out))
}

// What the writer produces at the cap, the reader accepts, and one byte more neither will.
func TestWriterReaderAgree(t *testing.T) {
	for _, size := range []int{MaxFrameFloor - 1, MaxFrameFloor} {
		frame, werr := AppendFrame(nil, rawObject(size), MaxFrameFloor)
		_, rerr := readAll(strings.NewReader(object(size)+"\n"), MaxFrameFloor)
		if werr == nil {
			require.ErrorIs(t, rerr, io.EOF)
			require.Len(t, frame, size+1)
		} else {
			require.ErrorIs(t, werr, ErrFrameTooLarge)
			require.ErrorIs(t, rerr, ErrFrameTooLarge)
		}
	}
}

type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestWriteFrame(t *testing.T) {
	var w countingWriter
	require.NoError(t, WriteFrame(&w, Event{Name: EventTeamEvent, Seq: 1}, 0))
	require.Equal(t, `{"event":"team.event","data":null,"seq":1}`+"\n", w.String())
	require.Equal(t, 1, w.writes, "one frame, one Write")

	require.ErrorIs(t, WriteFrame(&w, rawObject(MaxFrameFloor), MaxFrameFloor), ErrFrameTooLarge)
	require.Equal(t, 1, w.writes, "nothing written for a refused frame")

	require.EqualError(t, WriteFrame(failingWriter{}, map[string]int{}, 0), "wire: write frame: broken pipe")
}

// rawObject is object(n) as a value AppendFrame encodes to exactly those bytes.
func rawObject(n int) any { return rawJSON(object(n)) }

type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }

// BenchmarkAppendResponse encodes a delegate.request answer with AppendFrame and with encoding/json's generic
// path it skips, in the same run.
//
//	go test ./broker/wire -run '^$' -bench AppendResponse -benchmem
func BenchmarkAppendResponse(b *testing.B) {
	r := Response{ID: "c1942", Result: []byte(`{"grandchildTaskRef":"gc-0b5c0f9e-4a41-4d7c-9a1f-1c2d3e4f5a6b","reservedTokens":1000}`)}
	buf := make([]byte, 0, 256)
	b.Run("AppendFrame", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := AppendFrame(buf[:0], r, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := genericFrame(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestCompactResponseStaysOneLine: a CompactResponse whose result is not compact after all (it holds a newline) is
// compacted as a Response's result is, so its frame is one line.
func TestCompactResponseStaysOneLine(t *testing.T) {
	result := []byte("{\"a\":\n[1, 2]}")
	want, err := AppendFrame(nil, Response{ID: "c1", Result: result}, 0)
	require.NoError(t, err)
	got, err := AppendFrame(nil, CompactResponse{ID: "c1", Result: result}, 0)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	require.Equal(t, "{\"id\":\"c1\",\"result\":{\"a\":[1,2]}}\n", string(got))
}

// TestResultRoomIsWhatAResponseHolds: a result of exactly ResultRoom bytes fits a response frame to the id, one byte
// more does not, for ids the writer writes as they are and ids it escapes, in the smallest and the default frame.
func TestResultRoomIsWhatAResponseHolds(t *testing.T) {
	ids := []string{"", "1", "c12", strings.Repeat("<", 300), "a\"b\\c", "\u2028x\u2029", "é", strings.Repeat("\u2028", 100),
		string([]byte{0x01, 0x7f})}
	for _, maxFrame := range []int{MaxFrameFloor, 0, MaxFrameCeiling} {
		for _, id := range ids {
			room := ResultRoom(id, maxFrame)
			require.Positive(t, room, "%q in %d", id, maxFrame)
			fits := []byte(`"` + strings.Repeat("x", room-2) + `"`)
			_, err := AppendCompactResponse(nil, id, fits, maxFrame)
			require.NoError(t, err, "%q in %d: a result of %d bytes fits", id, maxFrame, room)
			over := []byte(`"` + strings.Repeat("x", room-1) + `"`)
			_, err = AppendCompactResponse(nil, id, over, maxFrame)
			require.ErrorIs(t, err, ErrFrameTooLarge, "%q in %d: one byte more does not", id, maxFrame)
		}
	}
	// An id that leaves no room at all.
	require.Zero(t, ResultRoom(strings.Repeat("a", MaxFrameFloor), MaxFrameFloor))
	require.Zero(t, ResultRoom(strings.Repeat("\u2028", MaxFrameFloor/3), MaxFrameFloor))
	require.Zero(t, ResultRoom("1", 7), "an invalid frame cap holds nothing")
}
