package bench

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSimReasonNamesTheSlotShare: the summary's rejections by reason named a refusal for the run's or the worker's
// share of the slots by its wire code, policy-denied, where crewd's metrics and the dashboard name its reason,
// slot-share-exceeded; the other messages keep the reasons they had.
func TestSimReasonNamesTheSlotShare(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{"delegate rejected: run holds 8 slot(s), its share of the pool, while 1 other run(s) wait; 16/16 in flight",
			"slot-share-exceeded"},
		{"delegate rejected: task 01_worker holds 8 slot(s), its share, while 2 other task(s) of its run wait; 9/16 " +
			"in flight", "slot-share-exceeded"},
		{"delegate rejected: nested spawn budget exhausted; 16/16 in flight", "slots-exhausted"},
		{"delegate rejected: depth 5 exceeds maxDepth 4", "depth-exceeded"},
		{"delegate rejected: something else", "policy-denied"},
	} {
		require.Equal(t, tc.want, simReason(tc.msg, "policy-denied"), tc.msg)
	}
}
