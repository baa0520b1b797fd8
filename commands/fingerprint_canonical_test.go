package commands

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// reflected is c's canonical encoding by reflection, the reference.
func reflected(t testing.TB, c Command) []byte {
	var buf bytes.Buffer
	require.NoError(t, encodeCanonical(&buf, c))
	return buf.Bytes()
}

func requireCanonicalAsReflection(t testing.TB, c Command) {
	b, ok := appendCanonical(nil, c)
	require.True(t, ok)
	require.Equal(t, reflected(t, c), b, "%#v", c)
}

// strAcrossLengths is a string of one of the lengths where msgpack's string
// header changes form.
func strAcrossLengths(r *rand.Rand) string {
	lens := []int{0, 1, 31, 32, 255, 256, 65535, 65536}
	return string(bytes.Repeat([]byte{byte('a' + r.IntN(26))}, lens[r.IntN(len(lens))]))
}

func TestCanonicalEncodingMatchesReflection(t *testing.T) {
	ints := []int64{0, 1, -1, 127, 128, -32, -33, 255, 256, 65535, 65536, math.MaxInt32, math.MinInt32, math.MaxInt64,
		math.MinInt64}
	floats := []float64{0, -0.5, 1e300, math.Inf(1), math.SmallestNonzeroFloat64}
	r := rand.New(rand.NewPCG(1, 2))
	for range 400 {
		s := func() *string {
			if r.IntN(3) == 0 {
				return nil
			}
			v := strAcrossLengths(r)
			return &v
		}
		i64 := func() *int64 {
			if r.IntN(3) == 0 {
				return nil
			}
			v := ints[r.IntN(len(ints))]
			return &v
		}
		var maxTurns *int
		if r.IntN(3) > 0 {
			v := int(ints[r.IntN(len(ints))])
			maxTurns = &v
		}
		var timeout *float64
		if r.IntN(3) > 0 {
			v := floats[r.IntN(len(floats))]
			timeout = &v
		}
		requireCanonicalAsReflection(t, &DelegateRequest{RunID: strAcrossLengths(r), TaskID: strAcrossLengths(r),
			Prompt: strAcrossLengths(r), Description: s(), Role: s(), Model: s(), MaxTurns: maxTurns,
			BudgetTokens: i64(), TimeoutSec: timeout, Untrusted: r.IntN(2) == 0})
		requireCanonicalAsReflection(t, &DelegateSettle{RunID: strAcrossLengths(r), SubID: strAcrossLengths(r),
			Outcome: strAcrossLengths(r), Text: strAcrossLengths(r), UsageTokens: i64()})
	}
	requireCanonicalAsReflection(t, &DelegateRequest{})
	requireCanonicalAsReflection(t, &DelegateSettle{})
}

// TestACutSettleIsEncodedAsSent: a settle whose text its caller cut (SentText set) is encoded as the settle its
// client sent, whose Text is SentText, so that its fingerprint does not depend on the cut.
func TestACutSettleIsEncodedAsSent(t *testing.T) {
	tokens := int64(9)
	cut := &DelegateSettle{RunID: "R", SubID: "gc-1", Outcome: OutcomeOK, Text: "<<", SentText: "<<<<",
		UsageTokens: &tokens}
	b, ok := appendCanonical(nil, cut)
	require.True(t, ok)
	require.Equal(t, reflected(t, &DelegateSettle{RunID: "R", SubID: "gc-1", Outcome: OutcomeOK, Text: "<<<<",
		UsageTokens: &tokens}), b)
}

func FuzzCanonicalEncodingMatchesReflection(f *testing.F) {
	f.Add("run", "task", "prompt", "desc", int64(1000), 3, 1.5, "ok", "text", true)
	f.Fuzz(func(t *testing.T, run, task, prompt, desc string, tokens int64, turns int, timeout float64, outcome,
		text string, set bool) {
		req := &DelegateRequest{RunID: run, TaskID: task, Prompt: prompt, Untrusted: set}
		settle := &DelegateSettle{RunID: run, SubID: task, Outcome: outcome, Text: text}
		if set {
			req.Description, req.Role, req.Model = &desc, &prompt, &outcome
			req.MaxTurns, req.BudgetTokens, req.TimeoutSec = &turns, &tokens, &timeout
			settle.UsageTokens = &tokens
		}
		requireCanonicalAsReflection(t, req)
		requireCanonicalAsReflection(t, settle)
	})
}

// A field added to either command must be added to its canonical encoder.
func TestCanonicalEncodingCoversEveryField(t *testing.T) {
	require.Equal(t, 10, reflect.TypeFor[DelegateRequest]().NumField(),
		"DelegateRequest changed: update its appendCanonical")
	// NB: DelegateSettle's sixth, SentText, is encoded in Text's place.
	require.Equal(t, 6, reflect.TypeFor[DelegateSettle]().NumField(),
		"DelegateSettle changed: update its appendCanonical")
}

func TestFingerprintOfACanonicalCommandAllocatesNothing(t *testing.T) {
	tokens := int64(1000)
	desc := "map the admission path"
	c := &DelegateRequest{RunID: "run-0", TaskID: "01_work", Prompt: "explore", Description: &desc,
		BudgetTokens: &tokens}
	var fp [fingerprintLen]byte
	require.Zero(t, testing.AllocsPerRun(10, func() { _ = fingerprintInto(&fp, c) }))
}
