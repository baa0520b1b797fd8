package picrew

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestABudgetTotalOutsideInt64IsReportedAsWritten: a manifest's budgetTotal past what an int64 holds (a number
// pi-crew never writes, a worker may) is taken as absent, as any outside 0..2^53 is, and its report quotes it as the
// manifest writes it. NB: the conversion of such a float to an int64 is MinInt64 on amd64, and the report said the
// budget was -9223372036854775808, for 1e19 as for -1e30.
func TestABudgetTotalOutsideInt64IsReportedAsWritten(t *testing.T) {
	for _, tc := range []struct{ written, reported string }{
		{"1e19", "1e19"},
		{"18446744073709551616", "18446744073709551616"},
		{"9223372036854775808", "9223372036854775808"},
		{"-1e30", "-1e30"},
		{"9007199254740994", "9007199254740994"},
		{"-5", "-5"},
		{`"-5"`, "-5"},
		{"1" + "00000000000000000000000000000000000000000000000000000000000000000000000000000000" +
			"00000000000000", "1000000000000000000000000000000000000000000000000000000000000000…"},
	} {
		s := &source{root: t.TempDir()}
		m, err := s.parseManifest(runA, "manifest.json", []byte(`{"runId":"`+runA+`","budgetTotal":`+tc.written+`}`))
		require.NoError(t, err, tc.written)
		require.Zero(t, int64(m.BudgetTotal), tc.written)
		require.Len(t, s.skipped, 1, tc.written)
		require.Equal(t, "budgetTotal "+tc.reported+" is not 0..9007199254740992 (crewlog's run.create): taken as "+
			"absent", s.skipped[0].Reason, tc.written)
	}
}
