package picrew

import (
	"fmt"
	"unicode/utf8"

	"github.com/crewlog/crewlog/events"
)

// cutTexts cuts each free text of payload p longer than its bound (events.ImportedTexts) to its first chars and a
// mark saying how long it was, the whole within the bound, and reports it (what names the write). NB: cut, not
// refused: the record (a task, a question, a message) is what the history needs, and its text's beginning is most of
// what a reader of it uses; a longer one is what no command of crewlog's records, which the dashboard, every query
// and every snapshot of the run would carry.
func (p *planner) cutTexts(what, typ string, payload any) {
	for _, t := range events.ImportedTexts(payload) {
		n := utf8.RuneCountInString(*t.Text)
		if len(*t.Text) <= t.Max || n <= t.Max {
			continue
		}
		// NB: the engine's mark of a text it clips past a run's bytes quota (commands' clipTexts), naming the source.
		mark := fmt.Sprintf("… [clipped: %d chars in pi-crew's files]", n)
		*t.Text = prefixChars(*t.Text, t.Max-utf8.RuneCountInString(mark)) + mark
		p.s.skip(p.r.id, "state/runs/"+p.r.id, 0, 0, "%s: %s %s of %d chars: cut to %d, the most crewlog records",
			clip(what), typ, t.Name, n, t.Max)
	}
}

// prefixChars is s's first n chars.
func prefixChars(s string, n int) string {
	for at := range s {
		if n == 0 {
			return s[:at]
		}
		n--
	}
	return s
}
