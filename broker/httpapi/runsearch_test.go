package httpapi

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/projections"
)

// TestARunsSearchAllocatesNoLoweredCopy: a search lowercased each field of every run it looked at
// (strings.ToLower copies a field that holds an upper-case or non-ASCII letter), up to 5,000 runs a page whose
// goals may be 256K characters each: a page's search allocated and threw away gigabytes. It now matches each field
// as it lowercases it, a window at a time, allocating nothing for a run.
func TestARunsSearchAllocatesNoLoweredCopy(t *testing.T) {
	run := projections.Run{RunID: "team_20261001100000_A1B2", Team: "Core", Workflow: "Ünïcode",
		Goal: strings.Repeat("Ship It Ωmega ", 20<<10)}
	for _, q := range []string{"no such run", "ΩMEGA SHIP"} {
		search := newRunSearch(q)
		var matched bool
		allocs := testing.AllocsPerRun(20, func() { matched = search.matches(run) })
		require.Equal(t, q != "no such run", matched, q)
		require.Zero(t, allocs, q)
	}
}

// lowercasedContains is the search's reference: what the runs list matched before it stopped lowercasing copies.
func lowercasedContains(field, q string) bool {
	return strings.Contains(strings.ToLower(field), strings.ToLower(q))
}

// TestARunsSearchMatchesAsALowercasedCopyDid: the search finds q in a field exactly where
// strings.Contains(strings.ToLower(field), strings.ToLower(q)) does: letters whose lowercase form is longer or
// shorter than they are, or ASCII (the Kelvin sign, İ), bytes that are not UTF-8 (lowercased as U+FFFD), and
// matches across the windows the search lowercases a field in, whatever the bytes a window ends in.
func TestARunsSearchMatchesAsALowercasedCopyDid(t *testing.T) {
	pad := strings.Repeat("x", searchWindow)
	cases := []struct{ field, q string }{
		{"Ship IT", "ship it"},
		{"ship it", "SHIP IT"},
		{"\u212a", "k"}, // the Kelvin sign lowercases to an ASCII k
		{"k", "\u212a"},
		{"\u0130", "i"}, // İ lowercases to an ASCII i
		{"\u023a", "\u2c65"},
		{"\u023a\u023a", "\u2c65\u2c65"}, // 2 bytes each, 3 lowercased
		{"a\xffb", "a\ufffdb"},           // a byte that is not UTF-8 lowercases to U+FFFD
		{"a\xffb", "a\xffb"},
		{"a\xe2\x84b", "\ufffd\ufffd"},
		{"\ufffd", "\xff"},
		{"", "a"},
		{"abc", ""},
		{pad[:searchWindow-2] + "NEEDLE", "needle"},
		{pad[:searchWindow-1] + "NEEDLE", "needle"},
		{pad[:searchWindow-3] + "\u023a\u023a\u023a", "\u2c65\u2c65"},
		{pad[:searchWindow-1] + "\u023a\u023a" + pad, "x\u2c65\u2c65x"},
		{pad + pad + "Ω", "xω"},
		{pad[:searchWindow-1] + "\xff\xff", "x\ufffd\ufffd"},
		{pad + pad + pad, strings.Repeat("x", 200)},
		{pad + pad, "xy"},
	}
	for _, tc := range cases {
		require.Equal(t, lowercasedContains(tc.field, tc.q), newRunSearch(tc.q).contains(tc.field), "%q in %q",
			tc.q, tc.field)
	}

	// Random fields of letters that change length when lowercased, bytes that are not UTF-8 and ASCII, some across
	// several windows, each searched for a piece of itself (upper-cased, lowercased, or as it is) or random letters.
	pieces := []string{"a", "A", "z", "Z", "k", "K", "\u212a", "i", "I", "\u0130", "\u0131", "ß", "\u1e9e", "Σ", "σ",
		"ς", "Ω", "\u2126", "ω", "\u023a", "\u2c65", "É", "é", "\ufffd", "\xff", "\xe2\x84", "\xc3", " ", "-", "0"}
	rng := rand.New(rand.NewPCG(25, 4096))
	text := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	search := map[string]*runSearch{}
	for i := range 20000 {
		n := rng.IntN(12)
		if i%50 == 0 {
			n = rng.IntN(3 * searchWindow)
		}
		field := text(n)
		var q string
		switch form := rng.IntN(4); {
		case form == 3 || len(field) == 0:
			q = text(1 + rng.IntN(4))
		default:
			from := rng.IntN(len(field))
			q = field[from : from+1+rng.IntN(min(len(field)-from, 300))]
			q = []string{strings.ToUpper(q), strings.ToLower(q), q}[form]
		}
		s, ok := search[q]
		if !ok {
			s = newRunSearch(q)
			search[q] = s
		}
		require.Equal(t, lowercasedContains(field, q), s.contains(field), "%q in %q", q, field)
	}
}

// FuzzRunSearchAgreesWithLowercasedContains: the search finds q in a field exactly where strings.Contains of their
// lowercased copies does, including across the windows it lowercases a field in (the field given is also searched
// after up to a window's worth of bytes, so that a match crosses from one window into the next).
func FuzzRunSearchAgreesWithLowercasedContains(f *testing.F) {
	for _, seed := range [][2]string{{"Ship IT", "ship it"}, {"\u212a\u0130", "ki"}, {"a\xffb", "\ufffd"},
		{"\u023a\u023a", "\u2c65"}, {"σς", "ΣΣ"}} {
		f.Add(seed[0], seed[1], uint16(0))
	}
	f.Fuzz(func(t *testing.T, field, q string, shift uint16) {
		if len(q) > 4*maxIDLen {
			return
		}
		s := newRunSearch(q)
		require.Equal(t, lowercasedContains(field, q), s.contains(field), "%q in %q", q, field)
		long := strings.Repeat("x", searchWindow-int(shift)%searchWindow) + field
		require.Equal(t, lowercasedContains(long, q), s.contains(long), "%q in %q", q, long)
	})
}
