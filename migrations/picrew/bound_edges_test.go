package picrew

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestAReportsReasonIsCutPastMaxReasonBytesOnly: a reason of maxReason bytes is kept whole, and one byte more is cut
// to at most maxReason bytes ending in "…". The tests of the bound used reasons of a mebibyte, which any cut within
// the bound passed.
func TestAReportsReasonIsCutPastMaxReasonBytesOnly(t *testing.T) {
	for _, tc := range []struct {
		name string
		len  int
		cut  bool
	}{
		{"one byte under the bound", maxReason - 1, false},
		{"at the bound", maxReason, false},
		{"one byte past the bound", maxReason + 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason := strings.Repeat("r", tc.len)
			got := cutReason(reason)
			if !tc.cut {
				require.Equal(t, reason, got)
				return
			}
			require.LessOrEqual(t, len(got), maxReason)
			require.True(t, strings.HasSuffix(got, "…"), "%q", got)
			require.True(t, utf8.ValidString(got))
		})
	}
}

// TestARunIsFullAtItsPendingBoundsExactly: a run stops reading its files once it holds maxPending writes, or
// maxPendingBytes bytes of lines, for the daemon, not one write or byte later. The scenario tests of the bounds
// (TestFollowHoldsAtMostMaxPendingBytes) read lines of a quarter mebibyte and allow one line past the bound, which
// a bound checked one byte late passed.
func TestARunIsFullAtItsPendingBoundsExactly(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pending int
		bytes   int64
		full    bool
	}{
		{"under both bounds", maxPending - 1, maxPendingBytes - 1, false},
		{"at the bound of writes", maxPending, 0, true},
		{"at the bound of bytes", 0, maxPendingBytes, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &runFollower{pending: make([]planned, tc.pending), pendingBytes: tc.bytes}
			require.Equal(t, tc.full, r.full())
		})
	}
}

// TestRunFilesAreCutPastMaxRunFilesOnly: maxRunFiles files of a kind are all read, unreported; one more is cut to
// maxRunFiles and reported once.
func TestRunFilesAreCutPastMaxRunFilesOnly(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   int
		reports int
	}{
		{"at the bound", maxRunFiles, 0},
		{"one file past the bound", maxRunFiles + 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reports []string
			kept := firstRunFiles(make([]int, tc.files), "steering files", func(reason string) {
				reports = append(reports, reason)
			})
			require.Len(t, kept, min(tc.files, maxRunFiles))
			require.Len(t, reports, tc.reports)
		})
	}
}

// TestATextIsCutPastItsBoundInCharsOnly: a free text is cut when it has more chars than its bound (a task's role:
// events.MaxIDChars), not more bytes: one of as many two-byte chars as the bound is kept whole and unreported, one
// more char is cut to the bound, and reported. The scenario tests cut texts one char past their bound or more.
func TestATextIsCutPastItsBoundInCharsOnly(t *testing.T) {
	for _, tc := range []struct {
		name    string
		text    string
		reports int
	}{
		{"as many one-byte chars as the bound", strings.Repeat("c", events.MaxIDChars), 0},
		{"as many two-byte chars as the bound", strings.Repeat("é", events.MaxIDChars), 0},
		{"one two-byte char past the bound", strings.Repeat("é", events.MaxIDChars+1), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &source{}
			p := newPlanner(s, &run{id: "run_texts"}, time.Now)
			created := &events.TaskCreated{Role: tc.text}
			p.cutTexts("task:01_build", "task.created", created)
			require.Len(t, s.skipped, tc.reports)
			if tc.reports == 0 {
				require.Equal(t, tc.text, created.Role)
				return
			}
			require.Equal(t, events.MaxIDChars, utf8.RuneCountInString(created.Role))
			require.True(t, strings.HasSuffix(created.Role, "… [clipped: 257 chars in pi-crew's files]"),
				"%q", created.Role)
		})
	}
}

// TestABatchTakesWritesUpToMaxBatchBytesExactly: a call to the daemon takes the writes in order while their encoded
// sizes add up to at most MaxBatchBytes: writes of exactly the budget go in one call, one byte more waits for the
// next, and a write of exactly the budget alone is sent, not left behind for good. The scenario tests' writes never
// summed to the budget exactly.
func TestABatchTakesWritesUpToMaxBatchBytesExactly(t *testing.T) {
	const budget = 100
	for _, tc := range []struct {
		name  string
		sizes []int
		n     int
	}{
		{"one write of the budget", []int{budget}, 1},
		{"two writes summing to the budget", []int{60, 40, 1}, 2},
		{"two writes one byte past the budget", []int{60, 41}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &Follower{o: FollowOptions{MaxBatchBytes: budget}}
			n, big := f.batchLen(make([]Write, len(tc.sizes)), tc.sizes)
			require.NoError(t, big)
			require.Equal(t, tc.n, n)
		})
	}
}
