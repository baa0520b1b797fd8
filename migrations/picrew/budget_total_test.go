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

// TestABudgetTotalThatIsNoIntegerCostsTheFieldOnly: a manifest's budgetTotal that is no integer (a string that does
// not parse as one, or parses past int64, a fraction, another JSON value) made the whole manifest fail to decode, and
// the run was not imported at all; a fraction was cut to the integer below it. Such a budgetTotal is taken as absent
// and reported as written now, as one outside 0..2^53 is, and the rest of the manifest is read.
func TestABudgetTotalThatIsNoIntegerCostsTheFieldOnly(t *testing.T) {
	for _, tc := range []struct{ written, reported string }{
		{`"abc"`, "abc"},
		{`"1e19"`, "1e19"},
		{`"12.5"`, "12.5"},
		{`" 12"`, " 12"},
		{`"99999999999999999999"`, "99999999999999999999"},
		{"1.5", "1.5"},
		{"-0.5", "-0.5"},
		{"true", "true"},
		{`{"n":1}`, `{"n":1}`},
		{"[1]", "[1]"},
	} {
		s := &source{root: t.TempDir()}
		m, err := s.parseManifest(runA, "manifest.json", []byte(`{"runId":"`+runA+`","goal":"the goal",`+
			`"budgetTotal":`+tc.written+`,"status":"running"}`))
		require.NoError(t, err, tc.written)
		require.Equal(t, "the goal", m.Goal, tc.written)
		require.Equal(t, "running", m.Status, tc.written)
		require.Zero(t, int64(m.BudgetTotal), tc.written)
		require.Len(t, s.skipped, 1, tc.written)
		require.Equal(t, "budgetTotal "+tc.reported+" is not 0..9007199254740992 (crewlog's run.create): taken as "+
			"absent", s.skipped[0].Reason, tc.written)
	}
	for _, tc := range []struct {
		written string
		want    int64
	}{{`"12"`, 12}, {"12", 12}, {"1e3", 1000}, {"2.0", 2}, {`""`, 0}, {"null", 0}} {
		s := &source{root: t.TempDir()}
		m, err := s.parseManifest(runA, "manifest.json", []byte(`{"runId":"`+runA+`","budgetTotal":`+tc.written+`}`))
		require.NoError(t, err, tc.written)
		require.Equal(t, tc.want, int64(m.BudgetTotal), tc.written)
		require.Empty(t, s.skipped, tc.written)
	}
}
