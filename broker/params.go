package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/events/jsonscan"
	"github.com/crewlog/crewlog/projections"
)

// params reads the params of a method the broker serves itself. The first problem is kept and later reads are
// no-ops, so handlers read straight through and check err once. pi-crew's methods tolerate unknown keys (a
// pi-crew client may send more than crewlog reads); crewlog's query.* methods refuse them (strict).
//
// NB: the params are read where they are, never decoded into a map: a read walks the object for its key (the last
// of a key repeated, as a map would keep it), and strict walks it once for the least key no read asked for. A map
// cost every key a client made up — a frame's worth, tens of thousands — a string and an entry, megabytes per request
// before a worker's query was even refused as forbidden, held at once by as many requests as the credential's
// connections; the walks cost a pass over the frame each (a handler reads a handful of keys), which its size is
// charged for (requestCost), and allocate nothing but a buffer of the longest escaped key (wire.EachMember).
type params struct {
	method string
	obj    []byte   // the params object; nil when none was given (absent or null)
	read   []string // the keys asked for, a handful
	err    error
}

func readParams(cl *call) *params {
	p := &params{method: cl.method}
	raw := bytes.TrimSpace(cl.params)
	if len(raw) == 0 || string(raw) == "null" {
		return p
	}
	// NB: valid JSON, a value of the request's frame (wire.ReadFrame checked it whole): not checked again.
	if raw[0] != '{' {
		p.err = badParams(p.method, "params must be an object")
		return p
	}
	p.obj = raw
	return p
}

func (p *params) fail(key, want string) {
	if p.err == nil {
		p.err = badParams(p.method, "%s must be %s", key, want)
	}
}

// get returns key's value; absent and null both mean "not given".
func (p *params) get(key string) (json.RawMessage, bool) {
	if !slices.Contains(p.read, key) {
		p.read = append(p.read, key)
	}
	if p.err != nil || p.obj == nil {
		return nil, false
	}
	var v []byte
	wire.EachMember(p.obj, func(k, value []byte) {
		if string(k) == key { // NB: the last one, as a map would keep
			v = value
		}
	})
	if v == nil || string(v) == "null" {
		return nil, false
	}
	return v, true
}

// int reads an integer in lo..hi, def when absent. Like Number.isInteger, 2.0 counts as an integer.
func (p *params) int(key string, lo, hi, def int64) int64 {
	v, ok := p.get(key)
	if !ok {
		return def
	}
	var f float64
	if v[0] == '"' || json.Unmarshal(v, &f) != nil || f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		p.fail(key, "an integer in "+itoa(lo)+".."+itoa(hi))
		return def
	}
	return int64(f)
}

// clampedInt reads a number as pi-crew reads the numbers of events.since, events.subscribe and task.waitStatus
// (D§7.5: `typeof v === "number" ? min(max(lo, floor(v)), hi) : def`): floored and clamped to lo..hi, and anything
// that is no number (absent, null, a string, a bool) the default. pi-crew never refuses these params, so a client
// written against it may send a value out of range, and is answered as pi-crew answers it. A number past float64's
// range (1e400) is clamped as the infinity JavaScript reads it as.
func (p *params) clampedInt(key string, lo, hi, def int64) int64 {
	v, ok := p.get(key)
	if !ok || v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return def
	}
	// NB: the frame is valid JSON (wire.Reader), so v is a number token; ParseFloat reads one past the range as ±Inf.
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return def
	}
	return int64(math.Min(math.Max(math.Floor(f), float64(lo)), float64(hi)))
}

// atLeastOne reads a number as pi-crew reads msg.inbox's limit (D§7.5: a finite number ≥ 1, else bad-params;
// `min(max(limit, 1), hi)`, which its slice floors): floored and capped at hi, and absent the default. A number
// past float64's range (1e400), infinite to JavaScript, is refused as pi-crew refuses it.
func (p *params) atLeastOne(key string, hi, def int64) int64 {
	v, ok := p.get(key)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f < 1 { // NB: the frame is valid JSON, so only a number token parses
		p.fail(key, "a finite number ≥ 1")
		return def
	}
	return int64(math.Min(math.Floor(f), float64(hi)))
}

// maxSinceSeq is the largest stream position a client can name exactly (a JSON number, 2^53): a larger one counts as
// it, and no run's stream is that long.
const maxSinceSeq = 1 << 53

// sinceSeq reads a stream position as pi-crew does (D§7.5, clampedInt): a number is floored and a negative one
// counts as 0, so a client that passes lastSeq-1 from an empty stream still reads from the start; no number counts
// as 0.
func (p *params) sinceSeq() uint64 { return uint64(p.clampedInt("sinceSeq", 0, maxSinceSeq, 0)) }

// str reads a string of at most max chars (Unicode code points, as every string bound of the protocol counts);
// required makes absence (or "") an error.
func (p *params) str(key string, required bool, max int) string {
	v, ok := p.get(key)
	if !ok {
		if required {
			p.fail(key, "a non-empty string")
		}
		return ""
	}
	var s string
	if v[0] != '"' || json.Unmarshal(v, &s) != nil || utf8.RuneCountInString(s) > max || required && s == "" {
		p.fail(key, "a string of at most "+itoa(int64(max))+" chars")
	}
	return s
}

// strs reads an optional array of at most n strings of 1..max chars each. A refusal names both bounds: one string
// too long is refused as the whole array is.
//
// NB: an array is counted, and its elements checked to be strings (or null), before it is decoded (stringsWithin,
// which allocates nothing): decoded whole, a frame of tens of thousands of one-char strings cost megabytes of slices
// before its count refused it, and so did one behind an element that is no string, which json.Unmarshal decodes past.
// The answer is the one the whole array got: every refusal here is the same.
func (p *params) strs(key string, n, max int) []string {
	v, ok := p.get(key)
	if !ok {
		return nil
	}
	var out []string
	if v[0] != '[' || !stringsWithin(v, n) || json.Unmarshal(v, &out) != nil ||
		slices.ContainsFunc(out, func(s string) bool { return s == "" || utf8.RuneCountInString(s) > max }) {
		p.fail(key, "an array of at most "+itoa(int64(n))+" strings of 1.."+itoa(int64(max))+" chars")
		return nil
	}
	return out
}

// stringsWithin reports whether arr, a JSON array in valid JSON, holds at most n elements, each a string or null
// (what json.Unmarshal reads into a []string), without decoding them.
func stringsWithin(arr []byte, n int) bool {
	cut, strs := jsonscan.ListPrefix(arr, n)
	return strs && cut == len(arr)
}

// strict refuses keys no read asked for, naming the least of them.
func (p *params) strict() {
	if p.err != nil || p.obj == nil {
		return
	}
	var least []byte // NB: a copy: the key given to the walk's func is valid only until it returns
	found := false
	wire.EachMember(p.obj, func(k, _ []byte) {
		if (!found || string(k) < string(least)) && !p.asked(k) {
			least, found = append(least[:0], k...), true
		}
	})
	if found {
		p.err = badParams(p.method, "unknown field %q", least)
	}
}

// asked reports whether a read asked for key k. NB: compared as bytes, not made a string for slices.Contains: a string
// longer than a few dozen bytes would be allocated, for every key.
func (p *params) asked(k []byte) bool {
	for _, r := range p.read {
		if string(k) == r {
			return true
		}
	}
	return false
}

// run is the run a request is about: the credential's, or for the admin params.runId (required). A runId naming
// another run than the credential's is forbidden, as in ParseCommand. The run must exist (no-manifest).
func (p *params) run(cl *call) string {
	id := p.runSummary(cl)
	if p.err != nil {
		return id
	}
	// A run that ended long ago is cold (commands/tier.go): read it back now, outside the state's lock, rather
	// than inside the query (which would hold the writer while it reads). Only now: the credential is known to be
	// allowed to read the run. The events re-folded are charged to it, as the events a replay reads are (pacer.go).
	if err := cl.c.warm(id); err != nil {
		p.err = err
	}
	return id
}

// runSummary is run without reading a cold run back: for a request answered from the run's summary and the
// daemon-wide state alone (query.run, query.slots), which a cold run's records cannot change.
func (p *params) runSummary(cl *call) string {
	id := p.str("runId", false, 256)
	if p.err != nil {
		return ""
	}
	c := cl.c
	if c.id.role == events.RoleAdmin {
		if id == "" {
			p.err = badParams(p.method, "runId is required with the admin credential")
			return ""
		}
	} else {
		if id != "" && id != c.id.runID {
			p.err = forbidden("%s: the credential is scoped to another run", p.method)
			return ""
		}
		id = c.id.runID
	}
	var (
		exists bool
		err    error
	)
	c.s.eng.Read(func(st *projections.State) { _, exists, err = st.LookupRun(id) })
	switch {
	case err != nil:
		p.err = err // NB: not no-manifest: a run whose summary the log cannot give back is not known to be absent
	case !exists:
		p.err = wire.Errorf(wire.CodeNoManifest, "run %q not found", id)
	}
	return id
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }
