package commands

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// errNotJSONSafe wraps every T3 refusal.
var errNotJSONSafe = errors.New("not JSON-safe")

// canonicalJSON writes raw with object keys sorted recursively (by their
// decoded text, as Go orders strings) and numbers as JavaScript prints them,
// refusing what T3 refuses: -0, numbers beyond float64 (non-finite),
// duplicate keys (not a plain object) and nesting deeper than
// maxJSONDepth — and anything that is not JSON. Strings are written as
// encoding/json writes them (HTML-safe escapes included).
//
// NB: it scans the bytes itself rather than decoding into maps: a proxied
// call's arguments pass here on every admission (T3, T14), and most
// arguments are small objects whose keys are already in order, which are
// then copied through with no allocation but the output.
func canonicalJSON(w *bytes.Buffer, raw []byte, depth int) error {
	c := canonicalizer{in: raw, depth: depth}
	if err := c.value(w); err != nil {
		return err
	}
	c.space()
	if c.i != len(c.in) {
		return fmt.Errorf("%w: trailing bytes after the value", errNotJSONSafe)
	}
	return nil
}

type canonicalizer struct {
	in    []byte
	i     int
	depth int
}

func (c *canonicalizer) fail(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errNotJSONSafe}, args...)...)
}

func (c *canonicalizer) space() {
	for c.i < len(c.in) {
		switch c.in[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *canonicalizer) value(w *bytes.Buffer) error {
	c.space()
	if c.i >= len(c.in) {
		return c.fail("empty value")
	}
	switch b := c.in[c.i]; {
	case b == '{':
		return c.object(w)
	case b == '[':
		return c.array(w)
	case b == '"':
		_, err := c.str(w)
		return err
	case b == 't':
		return c.literal(w, "true")
	case b == 'f':
		return c.literal(w, "false")
	case b == 'n':
		return c.literal(w, "null")
	case b == '-' || b >= '0' && b <= '9':
		return c.number(w)
	}
	return c.fail("unexpected %q", c.in[c.i])
}

func (c *canonicalizer) literal(w *bytes.Buffer, lit string) error {
	if !bytes.HasPrefix(c.in[c.i:], []byte(lit)) {
		return c.fail("invalid literal")
	}
	c.i += len(lit)
	w.WriteString(lit)
	return nil
}

func (c *canonicalizer) number(w *bytes.Buffer) error {
	start := c.i
	plain := true // an integer literal: -?[1-9][0-9]* or 0
	for c.i < len(c.in) {
		b := c.in[c.i]
		if b >= '0' && b <= '9' || b == '-' {
			c.i++
			continue
		}
		if b == '.' || b == 'e' || b == 'E' || b == '+' {
			plain = false
			c.i++
			continue
		}
		break
	}
	lit := c.in[start:c.i]
	if !json.Valid(lit) {
		return c.fail("invalid number %s", lit)
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	switch {
	case err != nil || math.IsInf(f, 0):
		return c.fail("number %s is not finite", lit)
	case f == 0 && math.Signbit(f):
		return c.fail("-0 is not allowed")
	}
	if plain && len(lit) < 16 { // exactly representable: JavaScript prints the same digits
		w.Write(lit)
		return nil
	}
	w.WriteString(jsNumber(f))
	return nil
}

// str writes the string at c.i as encoding/json writes it and returns its
// decoded text (only when it had to decode it: "" and false otherwise, the
// caller then reads the raw bytes).
func (c *canonicalizer) str(w *bytes.Buffer) (string, error) {
	start := c.i
	c.i++
	simple := true
	for {
		if c.i >= len(c.in) {
			return "", c.fail("unterminated string")
		}
		b := c.in[c.i]
		if b == '"' {
			break
		}
		if b == '\\' {
			simple = false
			c.i += 2
			continue
		}
		if b < 0x20 || b == '<' || b == '>' || b == '&' || b >= utf8.RuneSelf {
			simple = false
		}
		c.i++
	}
	c.i++
	lit := c.in[start:c.i]
	if simple {
		w.Write(lit)
		return string(lit[1 : len(lit)-1]), nil
	}
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		return "", c.fail("invalid string")
	}
	w.Write(mustMarshal(s))
	return s, nil
}

type member struct {
	key      string
	from, to int // the member's canonical bytes in the scratch buffer
}

func (c *canonicalizer) object(w *bytes.Buffer) error {
	if c.depth++; c.depth > maxJSONDepth {
		return c.fail("nested deeper than %d", maxJSONDepth)
	}
	defer func() { c.depth-- }()
	start := w.Len()
	c.i++
	// First pass: write the members straight through while their keys come
	// in order (the usual case); the first key out of order (or seen
	// before) falls back to sorting.
	w.WriteByte('{')
	last, n := "", 0
	for {
		c.space()
		if c.i < len(c.in) && c.in[c.i] == '}' && n == 0 {
			c.i++
			w.WriteByte('}')
			return nil
		}
		if c.i >= len(c.in) || c.in[c.i] != '"' {
			return c.fail("object key expected")
		}
		if n > 0 {
			w.WriteByte(',')
		}
		at, keyAt := c.i, w.Len()
		key, err := c.str(w)
		if err != nil {
			return err
		}
		if n > 0 && key <= last {
			// NB: the members before this key are read back from their
			// canonical bytes, where no object is out of order: read
			// again from c.in, each object nested in them would fall
			// back again, doubling the work at every level of nesting.
			read := append([]byte(nil), w.Bytes()[start+1:keyAt]...)
			w.Truncate(start)
			c.i = at
			return c.sortedObject(w, read)
		}
		last, n = key, n+1
		if err := c.colon(); err != nil {
			return err
		}
		w.WriteByte(':')
		if err := c.value(w); err != nil {
			return err
		}
		if done, err := c.next('}'); err != nil || done {
			if err == nil {
				w.WriteByte('}')
			}
			return err
		}
	}
}

// sortedObject reads the rest of an object, from the member key at c.i,
// into a scratch buffer, after the members read already (canonical, each
// followed by a ','), and writes them all ordered by key.
func (c *canonicalizer) sortedObject(w *bytes.Buffer, read []byte) error {
	var scratch bytes.Buffer
	var ms []member
	for before := (canonicalizer{in: read, depth: c.depth}); before.i < len(read); before.i++ {
		m, err := before.member(&scratch)
		if err != nil {
			return err
		}
		ms = append(ms, m)
	}
	for {
		c.space()
		m, err := c.member(&scratch)
		if err != nil {
			return err
		}
		ms = append(ms, m)
		if done, err := c.next('}'); err != nil {
			return err
		} else if done {
			break
		}
	}
	slices.SortFunc(ms, func(a, b member) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	w.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			if m.key == ms[i-1].key {
				return c.fail("key %q appears twice", m.key)
			}
			w.WriteByte(',')
		}
		w.Write(scratch.Bytes()[m.from:m.to])
	}
	w.WriteByte('}')
	return nil
}

// member writes the member at c.i (key, ':', value) to scratch and returns
// where it is.
func (c *canonicalizer) member(scratch *bytes.Buffer) (member, error) {
	if c.i >= len(c.in) || c.in[c.i] != '"' {
		return member{}, c.fail("object key expected")
	}
	from := scratch.Len()
	key, err := c.str(scratch)
	if err != nil {
		return member{}, err
	}
	if err := c.colon(); err != nil {
		return member{}, err
	}
	scratch.WriteByte(':')
	if err := c.value(scratch); err != nil {
		return member{}, err
	}
	return member{key: key, from: from, to: scratch.Len()}, nil
}

func (c *canonicalizer) array(w *bytes.Buffer) error {
	if c.depth++; c.depth > maxJSONDepth {
		return c.fail("nested deeper than %d", maxJSONDepth)
	}
	defer func() { c.depth-- }()
	c.i++
	w.WriteByte('[')
	c.space()
	if c.i < len(c.in) && c.in[c.i] == ']' {
		c.i++
		w.WriteByte(']')
		return nil
	}
	for n := 0; ; n++ {
		if n > 0 {
			w.WriteByte(',')
		}
		if err := c.value(w); err != nil {
			return err
		}
		if done, err := c.next(']'); err != nil || done {
			if err == nil {
				w.WriteByte(']')
			}
			return err
		}
	}
}

func (c *canonicalizer) colon() error {
	c.space()
	if c.i >= len(c.in) || c.in[c.i] != ':' {
		return c.fail("':' expected")
	}
	c.i++
	return nil
}

// next reads a ',' (false) or the closing byte (true).
func (c *canonicalizer) next(closing byte) (bool, error) {
	c.space()
	if c.i >= len(c.in) {
		return false, c.fail("unterminated value")
	}
	switch c.in[c.i] {
	case ',':
		c.i++
		return false, nil
	case closing:
		c.i++
		return true, nil
	}
	return false, c.fail("',' or %q expected", closing)
}
