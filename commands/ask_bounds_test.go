package commands

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// wait.request's bounds hold on both sides (D§7.5): a question of 1..MaxQuestionChars characters, 1..MaxAskOptions
// options of 1..MaxAskOptionChars characters each; at each bound the question is asked, one past it refused
// bad-params with nothing recorded. Characters, not bytes: a character beyond ASCII counts as one.
func TestWaitRequestBoundsHoldOnBothSides(t *testing.T) {
	options := func(n int) []string {
		o := make([]string, n)
		for i := range o {
			o[i] = strings.Repeat("o", i+1)
		}
		return o
	}
	for _, tc := range []struct {
		name     string
		question string
		options  []string
		refusal  string // "" when asked
	}{
		{"a question of one character", "q", nil, ""},
		{"a question of MaxQuestionChars characters", strings.Repeat("q", MaxQuestionChars), nil, ""},
		{"a question of MaxQuestionChars characters beyond ASCII", strings.Repeat("é", MaxQuestionChars), nil, ""},
		{"a question of one past MaxQuestionChars", strings.Repeat("q", MaxQuestionChars+1), nil, "question"},
		{"one option", "q", options(1), ""},
		{"MaxAskOptions options", "q", options(MaxAskOptions), ""},
		{"one past MaxAskOptions options", "q", options(MaxAskOptions + 1), "options must hold"},
		{"an option of MaxAskOptionChars characters", "q", []string{strings.Repeat("o", MaxAskOptionChars)}, ""},
		{"an option of one past MaxAskOptionChars", "q", []string{strings.Repeat("o", MaxAskOptionChars+1)},
			"each option"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := fxRunning(t, 0)
			dec, err := fxDecide(t, l.s, &WaitRequest{RunID: fxRun, TaskID: "02_exec", Question: tc.question,
				Options: tc.options})
			if tc.refusal != "" {
				fxRejected(t, dec, err, CodeBadParams, "invalid-params", tc.refusal)
				return
			}
			require.NoError(t, err)
			l.apply(dec)
			a, ok := l.s.Ask(fxRun, dec.Result.(WaitResult).QuestionID)
			require.True(t, ok)
			require.Equal(t, tc.question, a.Question)
		})
	}
}
