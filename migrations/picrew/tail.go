package picrew

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/crewlog/crewlog/events"
)

// maxTailRead bounds what one pass reads of one file; the rest is read by
// the next pass, so a huge file is imported in bounded steps.
const maxTailRead = 4 << 20

// maxLine is the longest line the one-shot import reads (readLines' limit)
// and lastLine looks back over. A followed file's line longer than one read
// (maxTailRead) is reported and skipped to its newline (tail.skipping).
const maxLine = 16 << 20

// tail is the read position of one JSONL file pi-crew appends to: the byte
// after the last complete line read, the file's identity (inode) and the
// hash of that line. Lines counts the lines before Offset (1-based line
// numbers for reports and steering ids).
type tail struct {
	rel    string // path relative to the root, slash-separated
	inode  int64
	size   int64
	offset int64
	lines  int64
	hash   string // hex SHA-256 of the line ending at offset ("" at 0)
	// lastLen is that line's length (-1: unknown, as after a resume).
	lastLen int64
	// partial is the partial last line (no newline yet) the follower last
	// found after offset.
	partial partialLine
	// heldIn is the follower's pass of its run (runFollower.passes) in which a steering line was first held for its
	// mailbox message (0: none is), and holdUpTo the end of the complete lines read then: every line up to it has
	// waited since that pass.
	heldIn   uint64
	holdUpTo int64
	// mark is the size a mailbox file had at the end of its run's pass markIn (0: none noted), after the pass read
	// the steering lines it held (runFollower.markMailboxes): read up to it, the file is read for those lines.
	mark   int64
	markIn uint64
	// skipping: the bytes at offset are the rest of a line longer than one
	// read (maxTailRead), skipped up to its newline.
	skipping bool
}

// partialLine is a line without its newline at the end of a followed file.
// One being written is normal (a reader can see a write cut at a page
// boundary), so it is reported only when it has stayed the same, in a
// file that did not grow, for the follower's SettleAfter: a writer that
// stopped mid-line.
type partialLine struct {
	seen     bool
	at, size int64     // where it starts; the file's size when first seen so
	since    time.Time // when first seen at this offset and size
	reported bool
	// toEnd: the read that last found it read the file to its end (its size then), not to a cut at maxTailRead, which
	// leaves the rest of the read without its newline too, the file going on past it.
	toEnd bool
}

// observe records a partial last line at offset at in a file of size bytes
// seen at now, and tells whether it is time to report it: once, when it
// has stayed unchanged for still.
func (p *partialLine) observe(at, size int64, now time.Time, still time.Duration) bool {
	if !p.seen || p.at != at || p.size != size {
		*p = partialLine{seen: true, at: at, size: size, since: now}
		return false
	}
	if p.reported || now.Sub(p.since) < still {
		return false
	}
	p.reported = true
	return true
}

// stays reports whether the partial last line seen is all a file of size bytes holds past at, the offset read up
// to, as when it was seen (by a read to the file's end): read again, it would yield nothing new.
func (p *partialLine) stays(at, size int64) bool {
	return p.seen && p.toEnd && p.at == at && p.size == size
}

// line is one complete line read by a tail.
type line struct {
	n    int   // 1-based line number
	end  int64 // offset just after its newline
	text []byte
	// rest: the end of a line longer than one read, skipped (text is nil).
	rest bool
}

func lineHash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// fileID is a regular file's identity and size; anything else is an
// error (statFile).
func (c *crewRoot) fileID(p string) (inode, size int64, err error) {
	st, err := c.statFile(p)
	if err != nil {
		return 0, 0, err
	}
	s := stampOfInfo(st)
	return s.inode, s.size, nil
}

// checkpoint is t as recorded in the log.
func (t *tail) checkpoint() events.ImportCheckpoint {
	return events.ImportCheckpoint{Source: events.ForeignSourcePicrew, Path: t.rel, Inode: t.inode, Size: t.size,
		Offset: t.offset, LastLineHash: t.hash, Lines: t.lines}
}

// resumable reports whether the file at p still holds what checkpoint c
// says was read: the same inode, at least c.Offset bytes, and the line
// ending at c.Offset hashing to c.LastLineHash. Otherwise the file was
// truncated, rotated or rewritten, and reading starts again at 0 (the
// command ids make that safe); why is the reason to report.
func (fsys *crewRoot) resumable(p string, c events.ImportCheckpoint) (ok bool, why string) {
	inode, size, err := fsys.fileID(p)
	switch {
	case err != nil:
		return false, fmt.Sprintf("unreadable: %v", err)
	case c.Offset == 0:
		return true, ""
	case inode != c.Inode:
		return false, "replaced since the last import (rotated: another file under the same name)"
	case size < c.Offset:
		return false, fmt.Sprintf("truncated since the last import (%d bytes, %d were read)", size, c.Offset)
	case c.LastLineHash == "":
		return false, fmt.Sprintf("read to within or just after a line longer than %d bytes, which cannot "+
			"be checked", maxTailRead)
	}
	last, err := fsys.lastLine(p, c.Offset)
	if err != nil || lineHash(last) != c.LastLineHash {
		return false, "rewritten since the last import (the last line read differs)"
	}
	return true, ""
}

// lastLineChunk is the first read of lastLine, and the step its reads grow
// from: a variable so tests can shrink it to a few bytes and put line ends
// on every chunk boundary.
var lastLineChunk int64 = 64 << 10

// lastLine returns the line (without its newline) that ends at off. It is
// called for every checkpointed file when the follower starts, so it reads
// backwards from off in chunks (lastLineChunk, doubling while no newline
// is found) and costs about the last line, not the file; a line of maxLine
// bytes or more that does not start the file is refused.
func (c *crewRoot) lastLine(p string, off int64) ([]byte, error) {
	f, _, err := c.openFile(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return lastLineAt(f, off, lastLineChunk, maxLine)
}

// lastLineAt is lastLine over r with a first read of chunk bytes and a line
// limit of limit bytes (parameters so tests can exercise the bounds small).
// The window it reads is at most limit+1 bytes before off: a newline found
// there delimits the line, the start of the file too; nothing found before
// the window's full size means the line is too long.
func lastLineAt(r io.ReaderAt, off, chunk, limit int64) ([]byte, error) {
	if off <= 0 {
		return nil, errors.New("no line ends there")
	}
	floor := max(0, off-limit-1) // the farthest back a read goes
	start := max(floor, off-max(chunk, 1))
	buf := make([]byte, off-start)
	if _, err := r.ReadAt(buf, start); err != nil {
		return nil, err
	}
	if buf[len(buf)-1] != '\n' {
		return nil, errors.New("no line ends there")
	}
	searched := 0 // buf[searched:len(buf)-1] holds no newline
	for {
		body := buf[:len(buf)-1]
		if i := bytes.LastIndexByte(body[:len(body)-searched], '\n'); i >= 0 {
			return body[i+1:], nil
		}
		switch {
		case start == 0:
			return body, nil
		case start == floor:
			return nil, errors.New("line too long")
		}
		// Grow the window to twice what was read, bounded by the limit,
		// reading only the bytes in front of what is already held.
		searched = len(body)
		next := max(floor, off-2*int64(len(buf)))
		grown := make([]byte, off-next)
		copy(grown[start-next:], buf)
		if _, err := r.ReadAt(grown[:start-next], next); err != nil {
			return nil, err
		}
		buf, start = grown, next
	}
}

// changed reports whether the file at p was replaced or truncated under
// t (so reading starts again at 0) and why.
func (t *tail) changed(inode, size int64) (bool, string) {
	switch {
	case t.inode != 0 && inode != t.inode:
		return true, "replaced (rotated: another file under the same name): read again from the start"
	case size < t.offset:
		return true, fmt.Sprintf("truncated to %d bytes (%d were read): read again from the start", size, t.offset)
	}
	return false, ""
}

// read reads the complete lines after t.offset (at most maxTailRead bytes
// of them, and no more bytes than the file holds) without moving t: the caller advances with advance once the
// lines are handled. A partial last line (no newline yet) is left for a
// later read; partial is its offset (-1 when there is none). A file opened
// that is not t's (t.inode) is not read: errNotLookedAt.
func (t *tail) read(c *crewRoot, p string) (lines []line, partial int64, err error) {
	f, st, err := c.openFile(p)
	if err != nil {
		return nil, -1, err
	}
	defer f.Close()
	if stampOfInfo(st).inode != t.inode {
		return nil, -1, errNotLookedAt
	}
	if _, err := f.Seek(t.offset, io.SeekStart); err != nil {
		return nil, -1, err
	}
	// NB: the buffer is what the file holds past the offset now, not the
	// bound: a pass reads a few new bytes of each of many files, and a
	// buffer of maxTailRead each would be megabytes of garbage per file.
	buf := make([]byte, max(0, min(st.Size()-t.offset, maxTailRead)))
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, -1, pathless(err)
	}
	buf = buf[:n]
	off, num := t.offset, t.lines
	partial = -1
	if t.skipping && len(buf) > 0 {
		// NB: what is read here is not a line of its own, but the end of
		// the long one: only its newline says where the next line starts.
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			if n == maxTailRead {
				return nil, -1, errLongLine
			}
			return nil, off, nil
		}
		num++
		off += int64(i + 1)
		lines = append(lines, line{n: int(num), end: off, rest: true})
		buf = buf[i+1:]
	}
	for len(buf) > 0 {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			if n == maxTailRead && off == t.offset {
				// One line longer than a whole read: skipped to its end
				// (skipping).
				return nil, -1, errLongLine
			}
			partial = off
			break
		}
		num++
		off += int64(i + 1)
		lines = append(lines, line{n: int(num), end: off, text: buf[:i]})
		buf = buf[i+1:]
	}
	return lines, partial, nil
}

var errLongLine = errors.New("picrew: a line longer than the read limit")

// errNotLookedAt is a file opened to be read that is not the one its reader looked at (its inode): replaced under
// its name between the look and the open (a rotation, a compaction). NB: its offset and last line are the other
// file's, so it is read at the next pass, whose look at it tells what happened to it.
var errNotLookedAt = errors.New("picrew: replaced since it was looked at")

// advance moves t past l, a line of the file at p.
func (t *tail) advance(c *crewRoot, p string, l line) {
	if l.rest {
		// NB: the long line was never held whole, so its hash is read back
		// once, as resumable reads it: without it a checkpoint after it was
		// never resumed from (the file read again from its start, reported
		// as rewritten) and a finished run ending in it was never let go,
		// reading it back at every pass. One of maxLine bytes or more keeps
		// "", which resumable refuses without reading. Its length stays
		// unknown, so rewritten does not read it back at every pass.
		t.offset, t.lines, t.hash, t.lastLen, t.skipping = l.end, int64(l.n), "", -1, false
		if last, err := c.lastLine(p, l.end); err == nil {
			t.hash = lineHash(last)
		}
		return
	}
	t.offset, t.lines, t.hash, t.lastLen = l.end, int64(l.n), lineHash(l.text), int64(len(l.text))
}

// rewritten reports whether the file at p no longer holds, just before
// t.offset, the line read last: pi-crew (or someone) rewrote it in place
// and it grew past what was read before the follower looked. It reads
// only that line back.
func (t *tail) rewritten(c *crewRoot, p string) bool {
	if t.offset == 0 || t.lastLen < 0 || t.hash == "" {
		return false
	}
	f, st, err := c.openFile(p)
	if err != nil || stampOfInfo(st).inode != t.inode {
		return false // gone or replaced: the listing or the read reports it
	}
	defer f.Close()
	n := t.lastLen + 1 // the line and its newline
	begin := t.offset - n
	withPrev := begin > 0 // then the newline before it too
	if withPrev {
		begin, n = begin-1, n+1
	}
	if begin < 0 {
		return true
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, begin); err != nil {
		// NB: only a file that ends before the line says it changed; a read that fails (a failing disk) says nothing
		// of what the file holds, and the read of the lines after it meets the same error and reports it.
		return errors.Is(err, io.EOF)
	}
	if withPrev {
		if buf[0] != '\n' {
			return true
		}
		buf = buf[1:]
	}
	return buf[len(buf)-1] != '\n' || lineHash(buf[:len(buf)-1]) != t.hash
}

// reset starts t again at the start of a new file.
func (t *tail) reset(inode int64) {
	t.inode, t.offset, t.lines, t.hash, t.partial, t.lastLen = inode, 0, 0, "", partialLine{}, 0
	t.heldIn, t.holdUpTo, t.skipping, t.mark, t.markIn = 0, 0, false, 0, 0
}

// markRead returns the pass after the one that noted t's mark, once t is read up to it, and forgets the mark; 0 while
// it is not (or none is noted).
func (t *tail) markRead() uint64 {
	if t.markIn == 0 || t.offset < t.mark {
		return 0
	}
	after := t.markIn + 1
	t.mark, t.markIn = 0, 0
	return after
}
