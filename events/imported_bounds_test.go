package events

import (
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events/jsonstring/jsonref"
)

// TestImportedBoundsEdges: each bound an imported record shares with a command takes its edge values and refuses the
// next ones out, chars counted as runes (an option or a question id of 2-byte chars at the bound is taken).
func TestImportedBoundsEdges(t *testing.T) {
	for name, c := range map[string]struct{ in, out []bool }{
		"usage count": {[]bool{UsageCountOK(0), UsageCountOK(MaxUsageTokens)},
			[]bool{UsageCountOK(-1), UsageCountOK(MaxUsageTokens + 1)}},
		"usage cost": {[]bool{UsageCostOK(0), UsageCostOK(1e300)},
			[]bool{UsageCostOK(-0.001), UsageCostOK(math.NaN()), UsageCostOK(math.Inf(1))}},
		"budget total": {[]bool{BudgetTotalOK(0), BudgetTotalOK(MaxBudgetTotal)},
			[]bool{BudgetTotalOK(-1), BudgetTotalOK(MaxBudgetTotal + 1)}},
		"budget fraction": {[]bool{BudgetFractionOK(0), BudgetFractionOK(1)},
			[]bool{BudgetFractionOK(-0.001), BudgetFractionOK(1.001), BudgetFractionOK(math.NaN())}},
		"options count": {[]bool{AskOptionsCountOK(nil), AskOptionsCountOK(make([]string, MaxAskOptions))},
			[]bool{AskOptionsCountOK(make([]string, MaxAskOptions+1))}},
		"option": {[]bool{AskOptionOK("o"), AskOptionOK(strings.Repeat("é", MaxAskOptionChars))},
			[]bool{AskOptionOK(""), AskOptionOK(strings.Repeat("o", MaxAskOptionChars+1))}},
		"question id": {[]bool{QuestionIDOK("q"), QuestionIDOK(strings.Repeat("é", MaxQuestionIDChars))},
			[]bool{QuestionIDOK(""), QuestionIDOK(strings.Repeat("é", MaxQuestionIDChars+1))}},
		"depth": {[]bool{DepthOK(0), DepthOK(MaxDepth)}, []bool{DepthOK(-1), DepthOK(MaxDepth + 1)}},
		"dependsOn count": {[]bool{DependsOnCountOK(nil), DependsOnCountOK(make([]string, MaxDependsOn))},
			[]bool{DependsOnCountOK(make([]string, MaxDependsOn+1))}},
		"imported id": {[]bool{ImportedIDOK(""), ImportedIDOK(strings.Repeat("t", MaxIDChars)),
			ImportedIDOK(strings.Repeat("é", MaxIDChars/2))},
			[]bool{ImportedIDOK(strings.Repeat("t", MaxIDChars+1)),
				ImportedIDOK(strings.Repeat("é", MaxIDChars/2+1))}},
		"dependency": {[]bool{DependencyOK("t"), DependencyOK(strings.Repeat("é", MaxIDChars/2))},
			[]bool{DependencyOK(""), DependencyOK(strings.Repeat("t", MaxIDChars+1)),
				DependencyOK(strings.Repeat("<", 43))}},
	} {
		for i, ok := range c.in {
			require.True(t, ok, "%s: value %d within the bound is refused", name, i)
		}
		for i, ok := range c.out {
			require.False(t, ok, "%s: value %d out of the bound is taken", name, i)
		}
	}
}

// TestUsageProblem: the first counter out of 0..MaxUsageTokens is named with its value, counters before the cost, and
// a cost that is not a finite number ≥ 0 is named "cost"; a report within the bounds has none.
func TestUsageProblem(t *testing.T) {
	for name, c := range map[string]struct {
		u     TaskUsage
		field string
		count int64
	}{
		"within": {TaskUsage{Input: MaxUsageTokens, Output: 0, CacheRead: 1, CacheWrite: 2, Turns: 3,
			Cost: 1e300}, "", 0},
		"input":         {TaskUsage{Input: -1}, "input", -1},
		"output":        {TaskUsage{Output: MaxUsageTokens + 1}, "output", MaxUsageTokens + 1},
		"cacheRead":     {TaskUsage{CacheRead: -2}, "cacheRead", -2},
		"cacheWrite":    {TaskUsage{CacheWrite: math.MaxInt64}, "cacheWrite", math.MaxInt64},
		"turns":         {TaskUsage{Turns: -3}, "turns", -3},
		"first counter": {TaskUsage{Output: -1, Turns: -2, Cost: -1}, "output", -1},
		"cost":          {TaskUsage{Cost: math.NaN()}, "cost", 0},
		"cost below 0":  {TaskUsage{Cost: -0.5}, "cost", 0},
		"cost infinite": {TaskUsage{Cost: math.Inf(1)}, "cost", 0},
	} {
		field, count := UsageProblem(c.u)
		require.Equal(t, c.field, field, name)
		require.Equal(t, c.count, count, name)
	}
}

// TestAskOptionsProblem: more than MaxAskOptions options is many, whatever they hold; within the count, an option
// that is not 1..MaxAskOptionChars chars is a bad option; an empty or absent list is neither.
func TestAskOptionsProblem(t *testing.T) {
	over := make([]string, MaxAskOptions+1)
	for name, c := range map[string]struct {
		o               []string
		many, badOption bool
	}{
		"absent":        {nil, false, false},
		"empty":         {[]string{}, false, false},
		"within":        {[]string{"a", strings.Repeat("é", MaxAskOptionChars)}, false, false},
		"too many":      {over, true, false},
		"empty option":  {[]string{"a", ""}, false, true},
		"long option":   {[]string{strings.Repeat("o", MaxAskOptionChars+1)}, false, true},
		"at the count":  {make([]string, MaxAskOptions), false, true},
		"many and long": {append([]string{strings.Repeat("o", MaxAskOptionChars+1)}, over...), true, false},
	} {
		many, badOption := AskOptionsProblem(c.o)
		require.Equal(t, c.many, many, name)
		require.Equal(t, c.badOption, badOption, name)
	}
}

// TestImportedIDsFitAFrame: an imported id is bounded by the bytes JSON writes it in, as well as its chars: 256 chars
// that Go 1.26's encoding/json writes in six bytes each (jsonref; Go 1.27's in no more: '<', '>', '&', a control
// char, U+2028, an invalid byte) took 1,536 bytes, larger alone than a frame of 1 KiB, and every read that met it (its
// task in query.tasks, its message in msg.inbox) answered oversize-frame for good. Every id an import may record takes
// at most as many bytes as the longest id crewlog's own commands record ([A-Za-z0-9_-], MaxIDChars), and so fits where
// that one does.
func TestImportedIDsFitAFrame(t *testing.T) {
	for _, c := range []struct {
		char  string
		bytes int // as encoding/json writes it
	}{{"t", 1}, {"é", 2}, {"😀", 4}, {"<", 6}, {">", 6}, {"&", 6}, {"\x01", 6}, {"\u2028", 6}, {"\xff", 6},
		{`"`, 2}, {"\n", 2}} {
		char := c.char
		most := MaxIDChars / c.bytes
		for n, fits := range map[int]bool{most: true, most + 1: false} {
			b := jsonref.MarshalString(strings.Repeat(char, n))
			require.Equal(t, fits, len(b)-len(`""`) <= MaxIDChars, "%q ×%d as encoding/json writes it", char, n)
		}
		require.True(t, ImportedIDOK(strings.Repeat(char, most)), "%q ×%d", char, most)
		require.False(t, ImportedIDOK(strings.Repeat(char, most+1)), "%q ×%d", char, most+1)
		if c.bytes > 1 {
			require.False(t, ImportedIDOK(strings.Repeat(char, MaxIDChars)), "%q ×%d", char, MaxIDChars)
		}
		require.True(t, DependencyOK(strings.Repeat(char, most)), "%q ×%d", char, most)
		require.False(t, DependencyOK(strings.Repeat(char, most+1)), "%q ×%d", char, most+1)
	}
}

// TestMessageWords: a message's kind, priority and delivery mode are empty or one of the words of D§2.6, and no
// other string is, however near one it is.
func TestMessageWords(t *testing.T) {
	for _, c := range []struct {
		ok      func(string) bool
		in, out []string
	}{
		{MessageKindOK, []string{"", KindMessage, KindNotify, KindSteer, KindFollowUp, KindResponse, KindGroupJoin},
			[]string{"Message", "message ", "follow_up", strings.Repeat("<", 60_000)}},
		{PriorityOK, []string{"", PriorityUrgent, PriorityNormal, PriorityLow}, []string{"high", "Normal", "<"}},
		{DeliveryModeOK, []string{"", DeliveryInterrupt, DeliveryNextTurn}, []string{"next-turn", "now", "<"}},
	} {
		for _, w := range c.in {
			require.True(t, c.ok(w), "%q", w)
		}
		for _, w := range c.out {
			require.False(t, c.ok(w), "%.20q", w)
		}
	}
}

// DecodePayload reads a payload as it was written, past every bound commands and importers hold to: a stored event
// that a later, tighter bound would refuse still decodes to what it recorded, so replay decides as the log did.
func TestDecodeReadsPayloadsPastTheBounds(t *testing.T) {
	budget := int64(MaxBudgetTotal + 1)
	cases := map[string]any{
		TypeRunCreated: &RunCreated{Team: strings.Repeat("t", MaxIDChars+1), Goal: strings.Repeat("g", MaxBodyChars+1),
			BudgetTotal: &budget},
		TypeTaskCreated: &TaskCreated{TaskID: "t", DependsOn: make([]string, MaxDependsOn+1), Depth: MaxDepth + 1,
			Kind: TaskKindWorkflow},
		TypeTaskUsage: &TaskUsage{TaskID: "t", Input: MaxUsageTokens + 1},
	}
	for typ, p := range cases {
		t.Run(typ, func(t *testing.T) {
			b, err := EncodePayload(p)
			require.NoError(t, err)
			got, err := DecodePayload(typ, SchemaVersion(typ), b)
			require.NoError(t, err)
			require.Equal(t, p, got)
		})
	}
}

// TestJSONRuneBytesAgreesWithMarshal: JSONRuneBytes counts a rune as the bytes encoding/json writes it in, for every
// ASCII byte and each rune encoding/json writes apart (a tab escaped in two, U+2029 in six like U+2028, a real U+FFFD
// in its three UTF-8 bytes and only an invalid byte in six). \b and \f, which encoding/json writes in two, are counted
// six: more, never less, so a bound measured with it still holds.
func TestJSONRuneBytesAgreesWithMarshal(t *testing.T) {
	marshalled := func(s string) int {
		return len(jsonref.MarshalString(s)) - len(`""`)
	}
	count := func(s string) int {
		r, size := utf8.DecodeRuneInString(s)
		require.Len(t, s, size, "%q is one rune", s)
		return JSONRuneBytes(r, size)
	}
	for _, c := range []struct {
		char  string
		bytes int
	}{{"t", 1}, {"\x7f", 1}, {"é", 2}, {"😀", 4}, {"\ufffd", 3}, {"\xff", 6}, {"\t", 2}, {"\n", 2}, {"\r", 2},
		{`"`, 2}, {`\`, 2}, {"<", 6}, {">", 6}, {"&", 6}, {"\x00", 6}, {"\x1f", 6}, {"\u2028", 6}, {"\u2029", 6},
		{"\b", 6}, {"\f", 6}} {
		require.Equal(t, c.bytes, count(c.char), "%q", c.char)
	}
	for b := 0; b < utf8.RuneSelf; b++ {
		s := string(rune(b))
		if b == '\b' || b == '\f' {
			require.Greater(t, count(s), marshalled(s), "%q is counted more than written", s)
			continue
		}
		require.Equal(t, marshalled(s), count(s), "%q", s)
	}
	for _, s := range []string{"é", "😀", "\ufffd", "\xff", "\u2028", "\u2029"} {
		require.Equal(t, marshalled(s), count(s), "%q", s)
	}
}

// TestTaskIDReserved: the words no task may be named are exactly the orchestrator's credential key and the three
// recipient names msg.send reads as a group of mailboxes before it looks for a task; a word near one is a task id.
func TestTaskIDReserved(t *testing.T) {
	for _, id := range []string{RecipientAll, RecipientParent, RecipientGroup} {
		require.True(t, RecipientName(id), id)
		require.True(t, TaskIDReserved(id), id)
	}
	require.False(t, RecipientName(OrchestratorKey))
	require.True(t, TaskIDReserved(OrchestratorKey))
	for _, id := range []string{"", "groups", "Group", "parent ", "al", "orchestrators", "t1"} {
		require.False(t, RecipientName(id), "%q", id)
		require.False(t, TaskIDReserved(id), "%q", id)
	}
}
