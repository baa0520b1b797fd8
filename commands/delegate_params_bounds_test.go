package commands

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/projections"
)

// delegate.request's parameter bounds (SPEC §4.1 step 2) on both sides of each: a value at a bound passes on to the
// next step (the run's lookup, which refuses no-manifest in an empty state), one past it is refused bad-params before
// anything is looked up.
func TestDelegateRequestParamBounds(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(r *DelegateRequest)
		ok   bool
	}{
		{"a prompt of the most chars",
			func(r *DelegateRequest) { r.Prompt = strings.Repeat("é", MaxPromptChars) }, true},
		{"a prompt one char longer",
			func(r *DelegateRequest) { r.Prompt = strings.Repeat("é", MaxPromptChars+1) }, false},
		{"a blank prompt", func(r *DelegateRequest) { r.Prompt = " \n" }, false},
		{"a description of one char", func(r *DelegateRequest) { r.Description = ptr("d") }, true},
		{"a description of the most chars",
			func(r *DelegateRequest) { r.Description = ptr(strings.Repeat("é", MaxDescriptionChars)) }, true},
		{"a description one char longer",
			func(r *DelegateRequest) { r.Description = ptr(strings.Repeat("é", MaxDescriptionChars+1)) }, false},
		{"a model of the most chars",
			func(r *DelegateRequest) { r.Model = ptr(strings.Repeat("m", MaxModelChars)) }, true},
		{"a model one char longer",
			func(r *DelegateRequest) { r.Model = ptr(strings.Repeat("m", MaxModelChars+1)) }, false},
		{"a blank model", func(r *DelegateRequest) { r.Model = ptr(" ") }, false},
		{"maxTurns 0", func(r *DelegateRequest) { r.MaxTurns = ptr(0) }, false},
		{"maxTurns 1", func(r *DelegateRequest) { r.MaxTurns = ptr(1) }, true},
		{"maxTurns at the limit", func(r *DelegateRequest) { r.MaxTurns = ptr(MaxTurnsLimit) }, true},
		{"maxTurns past the limit", func(r *DelegateRequest) { r.MaxTurns = ptr(MaxTurnsLimit + 1) }, false},
		{"budgetTokens -1", func(r *DelegateRequest) { r.BudgetTokens = ptr[int64](-1) }, false},
		{"budgetTokens 0", func(r *DelegateRequest) { r.BudgetTokens = ptr[int64](0) }, true},
		{"budgetTokens at the bound", func(r *DelegateRequest) { r.BudgetTokens = ptr[int64](MaxBudgetTokens) }, true},
		{"budgetTokens past the bound",
			func(r *DelegateRequest) { r.BudgetTokens = ptr[int64](MaxBudgetTokens + 1) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := &DelegateRequest{RunID: "R", TaskID: "P", Prompt: "x"}
			c.set(req)
			d, err := Decide(projections.New(), req, Env{})
			require.Empty(t, d.Events)
			var rej *RejectedError
			require.True(t, errors.As(err, &rej), "%v", err)
			want := CodeBadParams
			if c.ok {
				want = CodeNoManifest
			}
			require.Equal(t, want, rej.Code, rej.Message)
		})
	}
}
