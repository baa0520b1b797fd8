package httpapi

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/crewlog/crewlog/projections"
)

// searchUnit is the bytes of the runs' fields a search (q) goes through for each unit it is charged beyond its
// read's own, as a socket request is charged one more unit per 4 KiB of it: a page searches up to maxSearchScan
// runs, whose goals may be 256K characters each.
const searchUnit = 4 << 10

// searchWindow is the bytes of a field's lowercase form a search holds at once, besides the end of the window
// before it that a match may start in.
const searchWindow = 4 << 10

// runSearch is the runs list's search: a case-insensitive substring of a run's id, team, workflow or goal, exactly
// as strings.Contains(strings.ToLower(field), strings.ToLower(q)) finds it, for ASCII, Unicode and bytes that are
// not UTF-8 alike. It counts the bytes of the fields it went through (searched), which its read is charged by.
//
// NB: a field is lowercased a window at a time into the search's one buffer, each window searched as it is made,
// rather than lowercased whole: strings.ToLower copies every field that holds an upper-case or non-ASCII letter,
// and a page searches thousands of runs.
type runSearch struct {
	q        []byte // lowercased as strings.ToLower does
	buf      []byte // a window of a field's lowercase form, after the end of the window before it
	searched int    // bytes of the fields searched
	// known is whether each run searched since forget matched, by id: a page read again from the same cursor (up to
	// the first match it leaves out) takes it from here rather than search the run, and charge it, again. NB: a
	// run's id, team, workflow and goal never change.
	known map[string]bool
}

// newRunSearch is the search for q (not empty).
func newRunSearch(q string) *runSearch {
	lq := []byte(strings.ToLower(q))
	return &runSearch{q: lq, buf: make([]byte, 0, searchWindow+utf8.UTFMax+len(lq)), known: map[string]bool{}}
}

// matches reports whether run r matches the search: searched once since forget.
func (s *runSearch) matches(r projections.Run) bool {
	if m, ok := s.known[r.RunID]; ok {
		return m
	}
	m := s.contains(r.RunID) || s.contains(r.Team) || s.contains(r.Workflow) || s.contains(r.Goal)
	s.known[r.RunID] = m
	return m
}

// forget drops what matches knows, before a read from a cursor further on: at most one read's runs are known.
func (s *runSearch) forget() { clear(s.known) }

// units is what the fields searched so far cost: one unit per searchUnit bytes.
func (s *runSearch) units() int64 { return int64(s.searched / searchUnit) }

// contains reports whether the lowercase form of f holds the search's lowercased q, and counts f's bytes searched.
func (s *runSearch) contains(f string) bool {
	if len(s.q) == 0 {
		return true
	}
	buf := s.buf[:0]
	for i := 0; i < len(f); {
		// NB: rune by rune as strings.ToLower maps a string that is not ASCII (strings.Map of unicode.ToLower), which
		// gives an ASCII one's bytes too; a byte that is not UTF-8 is written U+FFFD, as strings.Map writes it.
		if c := f[i]; c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			buf = append(buf, c)
			i++
		} else {
			r, n := utf8.DecodeRuneInString(f[i:])
			buf = utf8.AppendRune(buf, unicode.ToLower(r))
			i += n
		}
		if len(buf) < searchWindow && i < len(f) {
			continue
		}
		if bytes.Contains(buf, s.q) {
			s.searched += i
			return true
		}
		// A match that starts in this window and ends in the next starts in its last len(q)-1 bytes.
		keep := min(len(buf), len(s.q)-1)
		buf = buf[:copy(buf, buf[len(buf)-keep:])]
	}
	s.searched += len(f)
	return false
}
