package events

import (
	"math"
	"unicode/utf8"
)

// The bounds an imported record shares with crewlog's own command that records the same thing: task.usage's counts,
// run.create's budget, wait.request's and wait.resolve's question, task.create's depth and dependsOn,
// delegate.request's and wait.request's timeouts. Both the engine's commands and
// the importers hold to them, each with its own refusal or report. NB: here, as the importers may use neither
// commands nor projections (as for ImportedTexts).
const (
	// MaxUsageTokens bounds each usage counter of a report, far above any real run, so Σ usage over a run's tasks
	// cannot overflow an int64.
	MaxUsageTokens = 1 << 40
	// MaxBudgetTotal bounds a run's budgetTotal: 2^53, up to which every integer reads back in JavaScript as itself
	// (2^53+1 is the first that does not).
	MaxBudgetTotal = 1 << 53
	// MaxAskOptions and MaxAskOptionChars bound a question's options (D§7.5, R5).
	MaxAskOptions     = 16
	MaxAskOptionChars = 256
	// MaxQuestionIDChars bounds a question's id (D§7.5): a question of a longer one is one wait.resolve cannot name.
	MaxQuestionIDChars = 128
	// MaxDepth bounds a task's depth (task.create) and so the largest maxDepth an engine is configured with, which an
	// admission's childDepth is held to.
	MaxDepth = 10
	// MaxDependsOn bounds the tasks a task depends on (task.create), each named by a task id of 1..MaxIDChars chars:
	// every read of the task, snapshot of its run and page of the dashboard copies the list.
	MaxDependsOn = 1024
	// MaxTimeoutSec is the longest a delegation may run (D§4.2's timeout-invalid): an admission holds a slot of the
	// daemon-wide nested pool until its deadline.
	MaxTimeoutSec = 86400
	// MaxAskTimeoutSec is the longest a question waits (pi-crew's broker clamps its deadline to at most 3600 s after
	// it is asked, R5): only the engine clock ends a question nobody answers, and a pending one keeps its run hot and
	// parked, and its task waiting, until then.
	MaxAskTimeoutSec = 3600
)

// UsageCountOK reports whether n is a usage counter task.usage takes: 0..MaxUsageTokens.
func UsageCountOK(n int64) bool { return n >= 0 && n <= MaxUsageTokens }

// UsageProblem names what makes u a report task.usage refuses: the first of "input", "output", "cacheRead",
// "cacheWrite" and "turns" outside 0..MaxUsageTokens (UsageCountOK), with its count, else "cost" when the cost is not
// a finite number ≥ 0 (UsageCostOK); "" when there is nothing. task.usage and the importers each word it their way.
func UsageProblem(u TaskUsage) (field string, count int64) {
	for _, c := range []struct {
		name string
		n    int64
	}{{"input", u.Input}, {"output", u.Output}, {"cacheRead", u.CacheRead}, {"cacheWrite", u.CacheWrite},
		{"turns", u.Turns}} {
		if !UsageCountOK(c.n) {
			return c.name, c.n
		}
	}
	if !UsageCostOK(u.Cost) {
		return "cost", 0
	}
	return "", 0
}

// SpendTokensOK reports whether n is what a budget.reserved or budget.charged an import records may add to its task's
// tokensSpent: 0..MaxUsageTokens, the bound of a usage counter. NB: a spend saturates rather than wraps, but one
// record near the int64 limit pushed its task's tokensSpent, and its run's budget use, to saturation.
func SpendTokensOK(n int64) bool { return n >= 0 && n <= MaxUsageTokens }

// UsageCostOK reports whether c is a usage cost task.usage takes: a finite number ≥ 0.
func UsageCostOK(c float64) bool { return !math.IsNaN(c) && !math.IsInf(c, 0) && c >= 0 }

// BudgetTotalOK reports whether n is a budgetTotal run.create takes: 0..MaxBudgetTotal.
func BudgetTotalOK(n int64) bool { return n >= 0 && n <= MaxBudgetTotal }

// BudgetFractionOK reports whether f is a budgetWarning or budgetAbort run.create takes: a fraction in [0,1] (a
// threshold above 1 is one no report reaches, below 0 one every report does).
func BudgetFractionOK(f float64) bool { return f >= 0 && f <= 1 } // NB: false for NaN

// AskOptionsCountOK reports whether o holds no more options than a question takes (MaxAskOptions).
func AskOptionsCountOK(o []string) bool { return len(o) <= MaxAskOptions }

// AskOptionOK reports whether o is an option a question takes: 1..MaxAskOptionChars chars.
func AskOptionOK(o string) bool {
	n := utf8.RuneCountInString(o)
	return n > 0 && n <= MaxAskOptionChars
}

// AskOptionsProblem says which bound of a question's options o breaks (D§7.5): many, more than MaxAskOptions
// (AskOptionsCountOK); badOption, within the count, an option that is not 1..MaxAskOptionChars chars (AskOptionOK);
// neither when o is within them. An empty list is within them: wait.request refuses it, an import records it as none.
func AskOptionsProblem(o []string) (many, badOption bool) {
	if !AskOptionsCountOK(o) {
		return true, false
	}
	for _, opt := range o {
		if !AskOptionOK(opt) {
			return false, true
		}
	}
	return false, false
}

// QuestionIDOK reports whether q is a question id wait.resolve can name: 1..MaxQuestionIDChars chars. NB: nothing
// answers a question it cannot name, so a task parked on one would wait for good.
func QuestionIDOK(q string) bool {
	// NB: a string of at most MaxQuestionIDChars bytes has at most as many chars; only a longer one is counted.
	return q != "" && (len(q) <= MaxQuestionIDChars || utf8.RuneCountInString(q) <= MaxQuestionIDChars)
}

// ImportedQuestionIDOK reports whether q is a question id an import may record: one wait.resolve can name
// (QuestionIDOK) that JSON writes in at most MaxIDChars bytes, as every id an import records (ImportedIDOK).
func ImportedQuestionIDOK(q string) bool { return QuestionIDOK(q) && ImportedIDOK(q) }

// DepthOK reports whether d is a depth the engine records: 0..MaxDepth.
func DepthOK(d int) bool { return d >= 0 && d <= MaxDepth }

// DependsOnCountOK reports whether deps lists no more tasks than a task depends on (MaxDependsOn).
func DependsOnCountOK(deps []string) bool { return len(deps) <= MaxDependsOn }

// DependencyOK reports whether d is a dependency a task records: a task id an import may record (ImportedIDOK), not
// empty.
func DependencyOK(d string) bool { return d != "" && ImportedIDOK(d) }

// ImportedIDOK reports whether id is one an imported record may name a task, a delegation, a question or a message
// by: one JSON writes in at most MaxIDChars bytes, so of at most MaxIDChars chars (an empty one names none). NB:
// every id crewlog's own commands record is within it, MaxIDChars chars of [A-Za-z0-9_-], and so is every id pi-crew
// writes (its task ids are path segments of that charset, its message, question and sub ids of it too); a longer one
// names nothing crewlog records, and every read and snapshot of its run copied it. Bytes, not only chars: the
// socket's reads answer in a frame down to 1 KiB, and 256 chars that encoding/json writes in six bytes each ('<',
// '>', '&', a control char, U+2028, an invalid byte) took 1,536, so that each read that met such an id (its task,
// its message, its delegation) answered oversize-frame for good; an id within the bound fits wherever one of
// crewlog's own does. The bound is the import's: a log that holds a longer id (recorded before it) replays.
func ImportedIDOK(id string) bool {
	if len(id) > MaxIDChars*utf8.UTFMax {
		return false // NB: more chars than the bound allows bytes, whatever they are: not measured
	}
	n := 0
	for i := 0; i < len(id); {
		r, size := utf8.DecodeRuneInString(id[i:])
		n += JSONRuneBytes(r, size)
		i += size
	}
	return n <= MaxIDChars
}

// JSONRuneBytes is the bytes encoding/json writes rune r, size bytes of a string, in (HTML's characters escaped):
// six for an invalid byte (\ufffd), a control char (\u00XX; NB: two for \n, \r and \t, and counted six for \b and
// \f, which take two), '<', '>', '&', U+2028 and U+2029; two for '"' and '\\'; its UTF-8 bytes for every other. NB:
// the bounds of an imported id and of a settle's cut text (commands.JSONPrefix) both measure with it.
func JSONRuneBytes(r rune, size int) int {
	switch {
	case r == utf8.RuneError && size == 1:
		return 6
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
		return 6
	}
	return size
}

// The recipient names msg.send and escalate read as a group of mailboxes before they look for a task (D§7.5).
const (
	// RecipientAll (orchestrator only) is every workflow task of the run, finished ones included, as in pi-crew;
	// grandchild (shadow) records are not.
	RecipientAll = "all"
	// RecipientParent is the run inbox, which the orchestrator consumes.
	RecipientParent = "parent"
	// RecipientGroup (worker only) is every other non-terminal workflow task of the sender's run.
	RecipientGroup = "group"
)

// RecipientName reports whether id is one of the recipient names (RecipientAll, RecipientParent, RecipientGroup):
// a task so named could never be sent a message of its own.
func RecipientName(id string) bool {
	return id == RecipientParent || id == RecipientAll || id == RecipientGroup
}

// TaskIDReserved reports whether id is a word no task may be named: the orchestrator's credential key
// (OrchestratorKey), and the recipient names (RecipientName).
func TaskIDReserved(id string) bool { return id == OrchestratorKey || RecipientName(id) }
