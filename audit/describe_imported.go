package audit

import (
	"fmt"

	"github.com/crewlog/crewlog/events"
)

// describePolicy tells a request a policy switch refused.
func describePolicy(ev events.Event) string {
	if p, ok := ev.Payload.(*events.PolicyAction); ok {
		return fmt.Sprintf("%s of %s refused: %s", p.Action, orDash(p.TaskID), p.Policy)
	}
	return ev.Type
}

// describeForeign tells an imported event that has no crewlog counterpart by its own type, seq and message.
func describeForeign(ev events.Event) string {
	if p, ok := ev.Payload.(*events.ForeignImported); ok {
		s := fmt.Sprintf("%s %s (seq %d)", p.Source, p.Type, p.Seq)
		if p.Message != "" {
			s += ": " + p.Message
		}
		return s
	}
	return ev.Type
}
