package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/eventlog"
)

// printReplayOutput writes replay's output, text or --json, for the replay out of the store l: its timeline read from
// l a second time (audit.Timeline) and written entry by entry, never held, so a replay of millions of events holds
// the state and not their timeline. The bytes are those of printing out with its timeline filled. widths are the
// text timeline's columns, fitted to every entry by the replay. An error is of the second read, or outputFailed:
// what came before it is written.
func (a *app) printReplayOutput(l *eventlog.Log, out replayOutput, widths timelineWidths) error {
	w := bufio.NewWriter(a.io.out)
	if a.json {
		if err := printReplayJSON(w, l, out); err != nil {
			_ = w.Flush()
			return err
		}
		if err := w.Flush(); err != nil {
			return outputFailed{err}
		}
		return nil
	}
	s := screen{w}
	printReplayHead(s, out)
	err := printTimeline(w, l, out, widths)
	if err == nil {
		if err = printReplayTail(s, out); err != nil {
			err = outputFailed{err}
		}
	}
	_ = w.Flush() // NB: a write that failed fails the command at its end (output.go), as every screen's does
	return err
}

// timelineHeader is the text timeline's first row.
var timelineHeader = [timelineColumns + 1]string{"POS", "TIME", "RUN", "ACTOR", "EVENT", "MEANING"}

// timelineColumns is how many cells of a text timeline's row are lined up: all but the meaning, the last, which is
// written as it is.
const timelineColumns = 5

// timelineWidths are the widths of the text timeline's lined-up columns: the widest cell of each, in runes, as
// text/tabwriter counts them (every table of crewctl is lined up by it). The zero value fits the header row.
type timelineWidths [timelineColumns]int

// fit widens w to e's cells.
func (w *timelineWidths) fit(e audit.Entry) {
	cells := timelineCells(e)
	for i, c := range cells[:timelineColumns] {
		w[i] = max(w[i], utf8.RuneCountInString(c))
	}
}

// timelineCells are e's cells in a text timeline, made printable as a screen's arguments are.
func timelineCells(e audit.Entry) [timelineColumns + 1]string {
	return [...]string{strconv.FormatUint(e.Position, 10), printable(e.Time.Format(time.RFC3339)), printable(e.Run),
		printable(e.Actor), printable(e.Type), printable(e.Meaning)}
}

// timelineGap is the space between two columns, a table's padding.
const timelineGap = 2

// printTimeline writes the text timeline of out, read from l, with its columns as wide as widths (and the header's)
// say, as a table (screen.table) of the same rows lines them up. A write that fails ends the read: the output is
// gone, and the command fails at its end (output.go).
func printTimeline(w io.Writer, l *eventlog.Log, out replayOutput, widths timelineWidths) error {
	rows := newTimelineRows(w, widths)
	if err := rows.write(timelineHeader); err != nil {
		return nil
	}
	var gone error
	err := audit.Timeline(l, out.Run, out.Position, func(e audit.Entry) error {
		gone = rows.write(timelineCells(e))
		return gone
	})
	if gone != nil {
		return nil
	}
	return err
}

// timelineRows writes the rows of a text timeline to w, each cell but the last padded to its column's width.
type timelineRows struct {
	w      io.Writer
	widths timelineWidths
	row    []byte
}

// newTimelineRows writes rows to w whose columns are as wide as widths and the header's.
func newTimelineRows(w io.Writer, widths timelineWidths) *timelineRows {
	for i, h := range timelineHeader[:timelineColumns] {
		widths[i] = max(widths[i], utf8.RuneCountInString(h))
	}
	return &timelineRows{w: w, widths: widths}
}

func (r *timelineRows) write(cells [timelineColumns + 1]string) error {
	r.row = r.row[:0]
	for i, c := range cells[:timelineColumns] {
		r.row = append(r.row, c...)
		r.row = append(r.row, strings.Repeat(" ", r.widths[i]-utf8.RuneCountInString(c)+timelineGap)...)
	}
	r.row = append(append(r.row, cells[timelineColumns]...), '\n')
	_, err := r.w.Write(r.row)
	return err
}

// outputFailed is an error of encoding or writing the output, not of reading the store.
type outputFailed struct{ err error }

func (e outputFailed) Error() string { return "encode output: " + e.err.Error() }
func (e outputFailed) Unwrap() error { return e.err }

// printReplayJSON writes out as printJSON does, with the timeline read from l entry by entry in place of
// out.Timeline, which is empty: the document is encoded without it and written up to its timeline's brackets, the
// entries between them, and the rest after.
func printReplayJSON(w io.Writer, l *eventlog.Log, out replayOutput) error {
	var doc bytes.Buffer
	enc := json.NewEncoder(&doc)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return outputFailed{err}
	}
	// NB: the first key at the top level named so: the keys before it (head, position, run) are numbers and a
	// string, whose newlines are escaped.
	const empty = "\n  \"timeline\": []"
	at := bytes.Index(doc.Bytes(), []byte(empty))
	if at < 0 {
		return outputFailed{errors.New("no timeline in the document")}
	}
	head, tail := doc.Bytes()[:at+len(empty)-1], doc.Bytes()[at+len(empty)-1:]
	if _, err := w.Write(head); err != nil {
		return outputFailed{err}
	}
	n := 0
	var entry bytes.Buffer
	err := audit.Timeline(l, out.Run, out.Position, func(e audit.Entry) error {
		if err := jsonElement(&entry, e, n == 0); err != nil {
			return outputFailed{err}
		}
		n++
		if _, err := w.Write(entry.Bytes()); err != nil {
			return outputFailed{err}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n > 0 {
		if _, err := w.Write([]byte("\n  ")); err != nil {
			return outputFailed{err}
		}
	}
	if out.decisions != nil && out.decisions.n > 0 {
		// NB: where Decisions goes, after the timeline's closing bracket; it is empty, so the document lacks it.
		if _, err := w.Write(append(tail[:1:1], ",\n  \"decisions\": ["...)); err != nil {
			return outputFailed{err}
		}
		if err := out.decisions.copyTo(w); err != nil {
			return outputFailed{err}
		}
		if _, err := w.Write([]byte("\n  ]")); err != nil {
			return outputFailed{err}
		}
		tail = tail[1:]
	}
	if _, err := w.Write(tail); err != nil {
		return outputFailed{err}
	}
	return nil
}

// jsonElement sets buf to v as an element of an array at the top level of replay's --json document (the timeline, the
// decisions), indented as printJSON indents it there, after a comma unless it is the first.
func jsonElement(buf *bytes.Buffer, v any, first bool) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf.Reset()
	if !first {
		buf.WriteByte(',')
	}
	buf.WriteString("\n    ")
	return json.Indent(buf, b, "    ", "  ")
}
