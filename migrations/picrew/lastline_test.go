package picrew

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireSameLastLine asserts that got answers as want: the same line, or
// an error with the same message.
func requireSameLastLine(t *testing.T, wantLine []byte, wantErr error, gotLine []byte, gotErr error, msg string) {
	t.Helper()
	if wantErr != nil {
		require.EqualError(t, gotErr, wantErr.Error(), msg)
		return
	}
	require.NoError(t, gotErr, msg)
	require.Equal(t, string(wantLine), string(gotLine), msg)
}

// writeTemp writes content to a file of its own and returns its path.
func writeTemp(t *testing.T, content []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "events.jsonl")
	require.NoError(t, os.WriteFile(p, content, 0o600))
	return p
}

// withLastLineChunk sets lastLineChunk for the rest of the test.
func withLastLineChunk(t *testing.T, chunk int64) {
	t.Helper()
	was := lastLineChunk
	lastLineChunk = chunk
	t.Cleanup(func() { lastLineChunk = was })
}

// TestLastLineAnswersAsBefore: lastLine, reading backwards in chunks,
// answers as the single read it replaces for each shape of file, with the
// chunk at its size and shrunk to a few bytes so line ends fall on chunk
// boundaries; off is the end of the file.
func TestLastLineAnswersAsBefore(t *testing.T) {
	atLimit := strings.Repeat("x", maxLine)
	tests := []struct {
		name    string
		content string
		wantErr string // "" when a line is expected (the reference's answer)
	}{
		{name: "empty file", content: "", wantErr: "no line ends there"},
		{name: "no newline at all", content: "abc", wantErr: "no line ends there"},
		{name: "only a newline", content: "\n"},
		{name: "one line", content: "abc\n"},
		{name: "two lines", content: "a\nbc\n"},
		{name: "empty last line", content: "abc\n\n"},
		{name: "trailing partial line", content: "abc\nde", wantErr: "no line ends there"},
		{name: "CRLF kept as read", content: "a\r\nbc\r\n"},
		{name: "line ends on each chunk boundary", content: "abc\ndefgh\nijk\n"},
		{name: "last line longer than a chunk", content: "a\n" + strings.Repeat("y", 3*64<<10+7) + "\n"},
		{name: "line of limit-1 bytes after a newline", content: "a\n" + atLimit[1:] + "\n"},
		{name: "line of the limit starting the file", content: atLimit + "\n"},
		{name: "line of the limit after a newline", content: "a\n" + atLimit + "\n", wantErr: "line too long"},
		{name: "line longer than the limit", content: "a\n" + atLimit + "zz\n", wantErr: "line too long"},
		{name: "line longer than the limit starting the file", content: atLimit + "zz\n", wantErr: "line too long"},
	}
	for _, tt := range tests {
		content := []byte(tt.content)
		p := writeTemp(t, content)
		off := int64(len(content))
		f, err := os.Open(p)
		require.NoError(t, err)
		wantLine, wantErr := lastLineReference(f, off, maxLine)
		require.NoError(t, f.Close())
		if tt.wantErr == "" {
			require.NoError(t, wantErr, tt.name)
		} else {
			require.EqualError(t, wantErr, tt.wantErr, tt.name)
		}
		for _, chunk := range []int64{lastLineChunk, 1, 3, 4} {
			t.Run(fmt.Sprintf("%s/chunk %d", tt.name, chunk), func(t *testing.T) {
				withLastLineChunk(t, chunk)
				got, err := (&crewRoot{dir: filepath.Dir(p)}).lastLine(p, off)
				requireSameLastLine(t, wantLine, wantErr, got, err, "")
			})
		}
	}
}

// TestLastLineRefusesANegativeOffset: a checkpoint's offset comes from the
// log; a negative one is an error, not a panic (the single read made a
// buffer of that length).
func TestLastLineRefusesANegativeOffset(t *testing.T) {
	p := writeTemp(t, []byte("abc\n"))
	for _, off := range []int64{-1, -1 << 40} {
		_, err := (&crewRoot{dir: filepath.Dir(p)}).lastLine(p, off)
		require.EqualError(t, err, "no line ends there", "offset %d", off)
	}
}

// TestLastLineAnswersAsBeforeOnRandomFiles: over random contents (newlines,
// carriage returns and letters), every offset up to past the end, and
// random chunk sizes and limits, the chunked read answers as the single
// read.
func TestLastLineAnswersAsBeforeOnRandomFiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("\n\rab")
	for range 400 {
		content := make([]byte, rng.IntN(120))
		newlineEvery := 1 + rng.IntN(30)
		for i := range content {
			content[i] = alphabet[2+rng.IntN(2)]
			if rng.IntN(newlineEvery) == 0 {
				content[i] = alphabet[rng.IntN(2)]
			}
		}
		chunk, limit := int64(1+rng.IntN(12)), int64(rng.IntN(40))
		r := fileLikeReader{bytes.NewReader(content)}
		for off := int64(0); off <= int64(len(content))+2; off++ {
			wantLine, wantErr := lastLineReference(r, off, limit)
			got, err := lastLineAt(r, off, chunk, limit)
			requireSameLastLine(t, wantLine, wantErr, got, err,
				fmt.Sprintf("content %q off %d chunk %d limit %d", content, off, chunk, limit))
		}
	}
}

// fileLikeReader reads as an *os.File does: an empty read is no error,
// wherever it is.
type fileLikeReader struct{ *bytes.Reader }

func (r fileLikeReader) ReadAt(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return r.Reader.ReadAt(p, off)
}

// shortLinesFile writes a file of about size bytes of short JSONL lines.
func shortLinesFile(t testing.TB, size int) (string, int64) {
	t.Helper()
	line := []byte(`{"type":"task.progress","taskId":"01_plan","note":"a short line"}` + "\n")
	content := bytes.Repeat(line, size/len(line))
	p := filepath.Join(t.TempDir(), "events.jsonl")
	require.NoError(t, os.WriteFile(p, content, 0o600))
	return p, int64(len(content))
}

// allocatedBy is the bytes f allocates (f runs in the test's goroutine).
func allocatedBy(f func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// TestLastLineMemoryFollowsTheLastLine: the last line of a 10 MiB file of
// short lines costs about one chunk, where the single read allocated the
// whole file; the follower does this for every checkpointed file when it
// starts.
func TestLastLineMemoryFollowsTheLastLine(t *testing.T) {
	p, size := shortLinesFile(t, 10<<20)
	f, err := os.Open(p)
	require.NoError(t, err)
	defer f.Close()

	var before, after uint64
	before = allocatedBy(func() {
		_, err := lastLineReference(f, size, maxLine)
		require.NoError(t, err)
	})
	after = allocatedBy(func() {
		_, err := (&crewRoot{dir: filepath.Dir(p)}).lastLine(p, size)
		require.NoError(t, err)
	})
	t.Logf("lastLine on a %d-byte file of short lines: %d bytes allocated (single read: %d)", size, after, before)
	require.Greater(t, before, uint64(size), "the single read allocates the whole file")
	require.Less(t, after, uint64(2*lastLineChunk), "the chunked read allocates about one chunk")
}

func BenchmarkLastLine(b *testing.B) {
	p, size := shortLinesFile(b, 10<<20)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (&crewRoot{dir: filepath.Dir(p)}).lastLine(p, size); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLastLineReference(b *testing.B) {
	p, size := shortLinesFile(b, 10<<20)
	f, err := os.Open(p)
	require.NoError(b, err)
	defer f.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := lastLineReference(f, size, maxLine); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzLastLineAgreesWithReference: for any file, offset (up to past the
// end), chunk and limit, the chunked read answers as the single read.
func FuzzLastLineAgreesWithReference(f *testing.F) {
	f.Add([]byte("abc\ndefgh\nijk\n"), uint16(14), uint8(3), uint8(40))
	f.Add([]byte("a\r\nbc\r\n"), uint16(7), uint8(1), uint8(2))
	f.Add([]byte("a\nxxxxxxxx\n"), uint16(11), uint8(2), uint8(8))
	f.Add([]byte("xxxxxxxx\n"), uint16(9), uint8(4), uint8(8))
	f.Add([]byte("ab\n"), uint16(5), uint8(2), uint8(0))
	f.Fuzz(func(t *testing.T, content []byte, off uint16, chunk, limit uint8) {
		r := fileLikeReader{bytes.NewReader(content)}
		wantLine, wantErr := lastLineReference(r, int64(off), int64(limit))
		got, err := lastLineAt(r, int64(off), int64(chunk), int64(limit))
		requireSameLastLine(t, wantLine, wantErr, got, err,
			fmt.Sprintf("content %q off %d chunk %d limit %d", content, off, chunk, limit))
	})
}
