package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"
)

// Text that workers chose — a run's goal, a task's title, a request id, a tool's name, a message, a reason — reaches
// the operator's terminal in crewctl's lines and tables. A terminal obeys some characters instead of showing them:
// an escape sequence retitles the window, clears the screen or moves the cursor to rewrite lines above; a C1 control
// (U+0080..U+009F) is one to some terminals; a carriage return, newline or tab in a value forges a row or a column
// of a table; a bidirectional override reorders what the operator reads; a zero-width character makes two different
// ids look alike. So every line crewctl writes for a person goes through a screen, which prints each argument made
// printable and only crewctl's own format strings as they are. Machine output (--json) is written as it is by
// machineLine or a JSON encoder: a script reads it, and JSON escapes every C0 control.

// printable returns s with every character a terminal could obey, or that shows nothing, written as its Go escape:
// control characters (C0, DEL, C1) as \n, \t, \r, \x1b, \u009b; format characters (bidirectional overrides,
// isolates and marks, zero-width characters) and line and paragraph separators as \u202e, \u200b, \u2028; a byte
// that is not UTF-8 as \xff. Everything else, a backslash included, stays as it is, so printable(printable(s)) ==
// printable(s): a value escaped twice reads as once.
func printable(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || hidden(r) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for s = s[i:]; s != ""; {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case hidden(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

// hidden reports whether a terminal may act on r, or show nothing for it.
func hidden(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// screen writes lines for a person to w: each argument is formatted as its verb asks and then made printable; the
// format string, crewctl's own, is written as it is, its newlines and tabs included. There is no println: text
// crewctl means as it is belongs in the format, and anything else is an argument. A write error is returned
// for the caller that cares; a terminal that went away is no reason to stop a command that already did its work,
// though the command then fails at its end (output.go).
type screen struct{ w io.Writer }

func (s screen) printf(format string, args ...any) error {
	_, err := fmt.Fprintf(s.w, format, shownAll(args)...)
	return err
}

// table lines up tab-separated cells for a person: its values are made printable as a screen's are, so none of
// them adds a cell or a row.
type table struct {
	screen
	tw *tabwriter.Writer
}

// table starts a table, written to s once flushed.
func (s screen) table() table {
	tw := tabwriter.NewWriter(s.w, 0, 0, 2, ' ', 0)
	return table{screen{tw}, tw}
}

func (t table) flush() error { return t.tw.Flush() }

// machineLine writes one line of machine output, a JSON document, as it is.
func machineLine(w io.Writer, doc []byte) error {
	_, err := w.Write(append(doc[:len(doc):len(doc)], '\n'))
	return err
}

// shownAll wraps every argument in shown: numbers too, since %c prints one as a character. A width or precision
// therefore belongs in the format, never in a * argument.
func shownAll(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = shown{a}
	}
	return out
}

// shown formats its value as the verb, flags, width and precision ask, then makes the result printable: a string,
// an error, a Stringer or a struct printed with %v are all escaped alike.
type shown struct{ v any }

func (s shown) Format(f fmt.State, verb rune) {
	_, _ = io.WriteString(f, printable(fmt.Sprintf(fmt.FormatString(f, verb), s.v)))
}
