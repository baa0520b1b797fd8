package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// readAhead is how much the Reader asks its source for at a time. Most frames fit, and then they are returned from
// this buffer without a copy.
const readAhead = 4096

// maxEmptyReads bounds how often a source may return (0, nil) in a row before the Reader gives up, as bufio does.
const maxEmptyReads = 100

// Reader splits an NDJSON stream into frames and enforces the frame cap while it reads, so that a peer can never
// make it hold more than one frame's worth of bytes: a line is refused as soon as it is longer than the cap allows,
// without reading the rest of it.
//
// Concurrency: a Reader is not safe for concurrent use; a connection has one reading goroutine.
//
// Errors: ReadFrame returns io.EOF at a clean end of stream, and otherwise an error matching ErrFrameTooLarge,
// ErrMalformed or ErrTruncated, or the source's error wrapped (matching ErrTruncated too when it cut a line). Every
// error is sticky: once ReadFrame has failed it returns the same error forever, because the position in the stream
// is no longer a frame boundary that both sides agree on.
type Reader struct {
	src   io.Reader
	limit int    // frame cap, newline included
	buf   []byte // read-ahead; buf[start:end] is read but not yet consumed
	start int
	end   int

	// A line longer than buf spills here, in chunks that are never copied while the line grows: the total
	// allocated for a refused line is at most limit-1 bytes, however long the peer's line is.
	spill  [][]byte
	nspill int // bytes held in spill
	cspill int // bytes allocated in spill

	budget SpillBudget // what spill's chunks are taken from (UseSpillBudget); nil: nothing
	taken  int         // bytes taken from budget for spill's chunks, given back when the line ends

	// skipped is the bytes of the blank lines read since the last frame: they count toward the next frame's cap, so
	// a peer cannot keep the reader skipping them for ever without delivering a frame.
	skipped int
	last    int // FrameBytes

	srcErr error // the source's error, reported once the bytes read before it are consumed
	err    error

	method string // the method of the last request ReadRequest decoded
}

// NewReader returns a Reader of frames from r with a cap of maxFrame bytes per frame, newline included. A maxFrame of
// 0 means DefaultMaxFrame; any other value must pass ValidateMaxFrame, or NewReader panics, because a cap out of
// range is a configuration bug that ValidateMaxFrame exists to catch earlier.
func NewReader(r io.Reader, maxFrame int) *Reader {
	limit, err := resolveMaxFrame(maxFrame)
	if err != nil {
		panic(err)
	}
	return newReader(r, limit, readAhead)
}

// newReader is a Reader of frames of at most limit bytes, with a read-ahead of at most readAhead: NewReader's, with
// the limit it resolved; the fuzz test's, with both below the floor, which only keeps a configured cap large enough
// for a hello and which the Reader's logic does not depend on.
func newReader(src io.Reader, limit, readAhead int) *Reader {
	return &Reader{src: src, limit: limit, buf: make([]byte, min(readAhead, limit))}
}

// SpillBudget is what a Reader takes the bytes of a line longer than its read-ahead from, as it makes each chunk the
// line spills into, and gives them back to when the line ends: complete (before ReadFrame returns it), refused, or
// cut off by its source. A line within the read-ahead takes nothing.
type SpillBudget interface {
	// Take reserves n bytes, waiting for room as long as it sees fit; false refuses them, and the Reader fails with
	// ErrNoRoom.
	Take(n int) bool
	// Release gives back n bytes Take reserved.
	Release(n int)
}

// UseSpillBudget makes r take the bytes of its spilled lines from b; call it before the first ReadFrame.
func (r *Reader) UseSpillBudget(b SpillBudget) { r.budget = b }

// ReadFrame returns the next frame without its '\n' (and without a '\r' before it, so CRLF peers work). Blank lines
// are skipped, and count toward the cap of the frame after them. A frame is a single JSON object in valid UTF-8 of
// at most maxFrame-1 bytes, less the blank lines before it.
//
// The returned slice is only valid until the next call to ReadFrame; copy it to keep it.
func (r *Reader) ReadFrame() ([]byte, error) {
	for r.err == nil {
		line, err := r.line()
		if err != nil {
			if errors.Is(err, ErrFrameTooLarge) {
				r.last, r.skipped = r.limit, 0 // NB: the cap's worth was read, at least
			}
			// NB: the Reader is done: a refused line's chunks are given back now, not when it is dropped.
			r.dropSpill()
			r.err = err
			break
		}
		size := len(line) + 1
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if isBlank(line) {
			r.skipped += size
			continue
		}
		r.last, r.skipped = r.skipped+size, 0 // NB: a line refused malformed took its bytes as a frame does
		if err := checkFrame(line); err != nil {
			r.err = err
			break
		}
		return line, nil
	}
	return nil, r.err
}

// FrameBytes is how many bytes of the stream the frame ReadFrame returned last took: the blank lines before it, the
// frame and its line end; after a line refused malformed, that line's, after one over the cap, the cap, and after one
// the stream ended in (ErrTruncated, by an end of file or the source's error), the bytes of it read; after the end of
// the stream at a line boundary, the blank lines read since the last frame. A caller that weighs its peer's work by
// the bytes it sent reads it here.
func (r *Reader) FrameBytes() int { return r.last }

// line returns the next line without its '\n'.
func (r *Reader) line() ([]byte, error) {
	emptyReads := 0
	for {
		if i := bytes.IndexByte(r.buf[r.start:r.end], '\n'); i >= 0 {
			seg := r.buf[r.start : r.start+i]
			r.start += i + 1
			// The frame is the line plus its newline, after the blank lines before it.
			if r.skipped+r.nspill+len(seg)+1 > r.limit {
				return nil, tooLarge(r.limit)
			}
			if r.nspill == 0 {
				return seg, nil
			}
			return r.takeSpill(seg), nil
		}
		// No newline yet. Refuse now if even a newline as the very next byte would make the frame too large: this
		// is what stops a long line before it is buffered.
		if r.skipped+r.nspill+(r.end-r.start)+1 > r.limit {
			return nil, tooLarge(r.limit)
		}
		if r.srcErr != nil {
			return nil, r.endOfStream()
		}
		if r.start == r.end {
			r.start, r.end = 0, 0
		} else if r.start > 0 {
			r.end = copy(r.buf, r.buf[r.start:r.end])
			r.start = 0
		}
		if r.end == len(r.buf) {
			read := r.skipped + r.nspill + len(r.buf) // NB: before spillBytes, which may spill part of buf and fail
			if !r.spillBytes(r.buf) {
				// What the line took of the stream: the Reader stops here, as for a line over the cap.
				r.last, r.skipped = read, 0
				return nil, ErrNoRoom
			}
			r.start, r.end = 0, 0
		}
		n, err := r.src.Read(r.buf[r.end:])
		if n < 0 || n > len(r.buf)-r.end {
			return nil, errors.New("wire: source returned an invalid count from Read")
		}
		r.end += n
		switch {
		case err != nil:
			r.srcErr = err
		case n == 0:
			if emptyReads++; emptyReads >= maxEmptyReads {
				return nil, fmt.Errorf("wire: read frame: %w", io.ErrNoProgress)
			}
		default:
			emptyReads = 0
		}
	}
}

// endOfStream classifies the source's error given the unterminated bytes still held. Trailing whitespace is not a
// frame, so it does not make the end of the stream a truncation.
func (r *Reader) endOfStream() error {
	partial := !isBlank(r.buf[r.start:r.end])
	for _, c := range r.spill {
		partial = partial || !isBlank(c)
	}
	held := r.skipped + r.nspill + (r.end - r.start)
	r.dropSpill()
	r.start, r.end = 0, 0
	// FrameBytes: what the line took of the stream, the blank lines before it included, or the blank lines alone.
	r.last, r.skipped = held, 0
	switch {
	case partial && r.srcErr != io.EOF:
		// NB: a truncation too: a peer that closes with bytes of ours unread ends the stream with a reset
		// (ECONNRESET), not an end of file, once we have read every byte it sent, and a caller that weighs its peer's
		// work by the bytes read would otherwise not count the line.
		return fmt.Errorf("wire: read frame: %w (%w)", r.srcErr, ErrTruncated)
	case r.srcErr != io.EOF:
		return fmt.Errorf("wire: read frame: %w", r.srcErr)
	case partial:
		return ErrTruncated
	default:
		return io.EOF
	}
}

// spillBytes appends p to the spilled line, and reports false when the budget refused a chunk it needed. Callers have
// checked that the line still fits, so the chunks, which double the total each time and are clamped to the cap,
// never add up to more than limit-1 bytes.
func (r *Reader) spillBytes(p []byte) bool {
	for len(p) > 0 {
		k := len(r.spill) - 1
		if k < 0 || len(r.spill[k]) == cap(r.spill[k]) {
			size := min(max(len(r.buf), r.cspill), r.limit-1-r.cspill)
			if r.budget != nil {
				if !r.budget.Take(size) {
					return false
				}
				r.taken += size
			}
			r.spill = append(r.spill, make([]byte, 0, size))
			r.cspill += size
			k++
		}
		n := min(len(p), cap(r.spill[k])-len(r.spill[k]))
		r.spill[k] = append(r.spill[k], p[:n]...)
		r.nspill += n
		p = p[n:]
	}
	return true
}

// takeSpill returns the spilled line, ended by its last segment seg, as one slice, and lets go of the chunks (their
// bytes given back to the budget), so a connection that once sent a big frame does not keep its memory.
//
// NB: seg is not spilled first: a chunk made for it would be taken from the budget, whose room a line that is
// complete must not wait for.
func (r *Reader) takeSpill(seg []byte) []byte {
	line := r.spill[0]
	if len(r.spill) > 1 || cap(line)-len(line) < len(seg) {
		line = make([]byte, 0, r.nspill+len(seg))
		for _, c := range r.spill {
			line = append(line, c...)
		}
	}
	line = append(line, seg...)
	r.dropSpill()
	return line
}

// dropSpill lets go of the spilled line's chunks and gives their bytes back to the budget.
func (r *Reader) dropSpill() {
	r.spill, r.nspill, r.cspill = nil, 0, 0
	if r.taken > 0 {
		r.budget.Release(r.taken)
		r.taken = 0
	}
}
