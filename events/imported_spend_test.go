package events

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTopUpOf: only a budget.reserved of subId ImportTopUpSubID is a top-up, by pointer or by value.
func TestTopUpOf(t *testing.T) {
	topUp := BudgetReserved{TaskID: "T", SubID: ImportTopUpSubID, Tokens: 5}
	require.Equal(t, &topUp, TopUpOf(&topUp))
	require.Equal(t, &topUp, TopUpOf(topUp))
	for name, p := range map[string]any{
		"other reservation": &BudgetReserved{TaskID: "T", SubID: "gc-1", Tokens: 5},
		"charge":            &BudgetCharged{TaskID: "T", SubID: ImportTopUpSubID, Tokens: 5},
		"nil":               nil,
	} {
		require.Nil(t, TopUpOf(p), name)
	}
}

// TestTopUpTokens: a top-up records what its task lacks of the spend it carries, never below 0, and a negative target
// or held spend (which no fold produces) neither wraps nor adds.
func TestTopUpTokens(t *testing.T) {
	for _, c := range []struct{ target, held, want int64 }{
		{150, 100, 50},
		{100, 100, 0},
		{80, 100, 0},
		{100, 0, 100},
		{100, -50, 100},
		{MaxUsageTokens, math.MaxInt64, 0},
		{math.MinInt64, 1, 0},
	} {
		require.Equal(t, c.want, TopUpTokens(c.target, c.held), "target %d held %d", c.target, c.held)
	}
}

// TestSpendOf: a budget.reserved or budget.charged, by pointer or by value, adds its tokens to its task's spend, a
// negative amount nothing; any other payload adds nothing.
func TestSpendOf(t *testing.T) {
	for name, c := range map[string]struct {
		p      any
		task   string
		tokens int64
		ok     bool
	}{
		"reserved":          {&BudgetReserved{TaskID: "T", Tokens: 7}, "T", 7, true},
		"reserved by value": {BudgetReserved{TaskID: "T", Tokens: 7}, "T", 7, true},
		"top-up":            {&BudgetReserved{TaskID: "T", SubID: ImportTopUpSubID, Tokens: 3}, "T", 3, true},
		"charged":           {&BudgetCharged{TaskID: "U", Tokens: 9}, "U", 9, true},
		"charged by value":  {BudgetCharged{TaskID: "U", Tokens: 9}, "U", 9, true},
		"negative":          {&BudgetCharged{TaskID: "U", Tokens: -9}, "U", 0, true},
		"other payload":     {&TaskCreated{TaskID: "T"}, "", 0, false},
		"nil":               {nil, "", 0, false},
	} {
		task, tokens, ok := SpendOf(c.p)
		require.Equal(t, c.task, task, name)
		require.Equal(t, c.tokens, tokens, name)
		require.Equal(t, c.ok, ok, name)
	}
}

// TestAddSpend: a spend adds a non-negative amount, stops at the largest int64 rather than wrapping, and a negative
// amount never lowers it.
func TestAddSpend(t *testing.T) {
	for _, c := range []struct{ spent, tokens, want int64 }{
		{5, 7, 12},
		{5, 0, 5},
		{5, -100, 5},
		{math.MaxInt64 - 1, math.MaxInt64, math.MaxInt64},
		{math.MaxInt64, 1, math.MaxInt64},
	} {
		require.Equal(t, c.want, AddSpend(c.spent, c.tokens), "spent %d tokens %d", c.spent, c.tokens)
	}
}
