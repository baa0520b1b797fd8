package commands

import (
	"unicode/utf16"
	"unicode/utf8"

	"github.com/crewlog/crewlog/events"
)

// Bounds of the free text a client sends with a status change. Each such
// field is recorded in the run's log for good, so each has a bound of its
// own, whatever the frame size (docs/protocol.md, "Run quotas and fair
// slots").
const (
	// MaxStatusTextChars bounds the free text of a status change: a run
	// transition's summary and reason, a task transition's error and
	// reason, a delegation's cancel reason (events.MaxStatusTextChars).
	MaxStatusTextChars = events.MaxStatusTextChars
	// MaxCwdChars bounds a working directory (Linux's PATH_MAX).
	MaxCwdChars = events.MaxCwdChars
	// MaxTitleChars bounds a task's title.
	MaxTitleChars = events.MaxTitleChars
	// MaxDependsOn bounds the tasks a task depends on (events.MaxDependsOn).
	MaxDependsOn = events.MaxDependsOn
)

// textField is a free-text param, by its params key, and its bound in chars.
type textField struct {
	name  string
	value string
	max   int
}

// checkText refuses (bad-params) the first field longer than its bound,
// naming the field and the bound. Nothing is cut: a caller that sent more
// learns it and can send less.
func checkText(method string, fields ...textField) error {
	for _, f := range fields {
		if longerThan(f.value, f.max) {
			return badParams("%s: %s must be at most %d chars", method, f.name, f.max)
		}
	}
	return nil
}

// longerThan reports whether s has more than max chars. Every string bound a
// client meets counts chars, Unicode code points, as JSON Schema's maxLength
// does (docs/protocol.md, "Conventions"): a client checking its strings with
// JavaScript's .length (UTF-16 units, never fewer) is never refused for a
// length it checked.
func longerThan(s string, max int) bool {
	// NB: a string of at most max bytes has at most max chars; only a longer
	// one is counted.
	return len(s) > max && utf8.RuneCountInString(s) > max
}

// charsOfUTF8 reports whether s is 1 to max chars of valid UTF-8: an id or
// name a later request sends back, which JSON carries unchanged only when
// it is valid UTF-8.
func charsOfUTF8(s string, max int) bool {
	return s != "" && utf8.ValidString(s) && !longerThan(s, max)
}

// utf16Units is the length of s as JavaScript's .length counts it: UTF-16 units, two for a char past U+FFFF.
func utf16Units(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}
