package audit

import (
	"fmt"
	"strings"

	"github.com/crewlog/crewlog/events"
)

// Describe says in one line what an event means: not its payload, but what
// it did to the crew ("delegate gc-… admitted at depth 2, reserved 20000 of
// 100000", "rejected: slots-exhausted (2/2 in flight)"). Each event family
// has its own describer; an event this build does not know is shown by its
// type alone.
func Describe(ev events.Event) string {
	family, _, _ := strings.Cut(ev.Type, ".")
	switch family {
	case "delegate":
		return describeDelegate(ev)
	case "budget":
		return describeBudget(ev)
	case "run":
		return describeRun(ev)
	case "task":
		return describeTask(ev)
	case "mailbox", "steer":
		return describeMailbox(ev)
	case "ask":
		return describeAsk(ev)
	case "credential":
		return describeCredential(ev)
	case "engine":
		return describeEngine(ev)
	case "policy":
		return describePolicy(ev)
	case "foreign":
		return describeForeign(ev)
	case "job", "lease", "proxy", "manifest":
		return describeJob(ev)
	}
	return ev.Type
}

// orDash shows an empty string as "-", so columns never collapse.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// withReason appends ": reason" when there is one.
func withReason(s, reason string) string {
	if reason == "" {
		return s
	}
	return fmt.Sprintf("%s: %s", s, reason)
}
