package httpapi

import (
	"net/url"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/crewlog/crewlog/events"
)

// Paging bounds, as the socket's query.* (limit 1..1000, default 100).
const (
	defaultLimit = 100
	maxLimit     = 1000
	maxCursorLen = 64
	maxIDLen     = 256
	// maxPageBytes bounds the JSON of one page's items (runs, events, a run's lists): a page of the largest
	// goals or messages the engine takes (commands.MaxBodyChars each) ends early with hasMore instead of growing to
	// hundreds of MiB. A page always holds one item, however large.
	maxPageBytes = 4 << 20
)

// params reads a request's query string. The first problem is kept in err; strict refuses keys nobody read, so
// a misspelt parameter is an error rather than silently ignored.
type params struct {
	v    url.Values
	read []string
	err  *apiError
}

func newParams(u *url.URL) *params {
	v, err := url.ParseQuery(u.RawQuery)
	p := &params{v: v}
	if err != nil {
		p.err = badParams("the query string is malformed: %v", err)
	}
	return p
}

func (p *params) fail(e *apiError) {
	if p.err == nil {
		p.err = e
	}
}

// single is the single value of key, and whether there is one: false when it is absent ("") or given more than once
// (kept as the problem).
func (p *params) single(key string) (string, bool) {
	p.read = append(p.read, key)
	switch vs := p.v[key]; len(vs) {
	case 0:
		return "", false
	case 1:
		return vs[0], true
	default:
		p.fail(badParams("%s is given %d times; give it once", key, len(vs)))
		return "", false
	}
}

// str is the single value of key ("" when absent), at most maxLen bytes of valid UTF-8.
func (p *params) str(key string, maxLen int) string {
	s, ok := p.single(key)
	if ok && (len(s) > maxLen || !utf8.ValidString(s)) {
		p.fail(badParams("%s must be at most %d bytes of UTF-8", key, maxLen))
		return ""
	}
	return s
}

// taskID is the single value of key ("" when absent), a task id: at most events.MaxIDChars chars (Unicode code
// points) of valid UTF-8, not bytes: a task imported before an import bounded an id's bytes too
// (events.ImportedIDOK) may be named by chars of several bytes each, and a bound in bytes would leave such a task
// listed with its mailbox and its account unreadable.
func (p *params) taskID(key string) string {
	s, ok := p.single(key)
	if ok && (!utf8.ValidString(s) || utf8.RuneCountInString(s) > events.MaxIDChars) {
		p.fail(badParams("%s must be at most %d chars of UTF-8", key, events.MaxIDChars))
		return ""
	}
	return s
}

// strs is every value of a repeatable key, at most maxN of at most maxLen bytes each.
func (p *params) strs(key string, maxN, maxLen int) []string {
	p.read = append(p.read, key)
	vs := p.v[key]
	if len(vs) > maxN {
		p.fail(badParams("%s is given %d times; at most %d", key, len(vs), maxN))
		return nil
	}
	for _, s := range vs {
		if s == "" || len(s) > maxLen || !utf8.ValidString(s) {
			p.fail(badParams("each %s must be 1..%d bytes of UTF-8", key, maxLen))
			return nil
		}
	}
	return vs
}

// bool is key as true or false (absent: false).
func (p *params) bool(key string) bool {
	switch s := p.str(key, 5); s {
	case "", "false":
		return false
	case "true":
		return true
	default:
		p.fail(badParams("%s must be true or false, got %q", key, s))
		return false
	}
}

// uint is key as an integer in lo..hi (absent: def).
func (p *params) uint(key string, lo, hi, def uint64) uint64 {
	s := p.str(key, 20)
	if s == "" {
		return def
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n < lo || n > hi {
		p.fail(badParams("%s must be an integer in %d..%d, got %q", key, lo, hi, s))
		return def
	}
	return n
}

// page reads limit and cursor.
func (p *params) page() (limit int, cursor string) {
	return int(p.uint("limit", 1, maxLimit, defaultLimit)), p.str("cursor", maxCursorLen)
}

// strict refuses every key not read, and returns the first problem.
func (p *params) strict() *apiError {
	for k := range p.v {
		if !slices.Contains(p.read, k) {
			p.fail(badParams("unknown parameter %q", k))
		}
	}
	return p.err
}
