package commands

import (
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestFenceNeutralisesMarkersAtEveryLineStart(t *testing.T) {
	for _, tc := range []struct{ name, text, body string }{
		{"start of text", "--- end delegate x", "-- ~delegate x"},
		{"after LF", "a\n--- delegate x", "a\n-- ~delegate x"},
		{"after CR", "a\r--- end delegate x", "a\r-- ~delegate x"},
		{"after CRLF", "a\r\n--- end delegate x", "a\r\n-- ~delegate x"},
		{"after U+2028", "a\u2028--- end delegate x", "a\u2028-- ~delegate x"},
		{"after U+2029", "a\u2029--- delegate x", "a\u2029-- ~delegate x"},
		{"mid-line is text", "a --- end delegate x", "a --- end delegate x"},
		{"no space after the word", "--- delegatex", "--- delegatex"},
		{"invalid UTF-8 kept", "\xff\n--- delegate x", "\xff\n-- ~delegate x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, "--- delegate gc-1 (ok) ---\n"+tc.body+"\n--- end delegate gc-1 ---", fence("gc-1", "ok", tc.text))
		})
	}
}

// neutraliseMarkersRuneByRune is the rewrite as first written, rune by rune:
// the reference neutraliseMarkers must agree with.
func neutraliseMarkersRuneByRune(text string) string {
	var b strings.Builder
	lineStart := true
	for i := 0; i < len(text); {
		if lineStart {
			if m := markerAt(text[i:]); m != "" {
				b.WriteString(neutralisedMarker)
				i += len(m)
				lineStart = false
				continue
			}
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		b.WriteString(text[i : i+size])
		i += size
		lineStart = r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029'
	}
	return b.String()
}

func FuzzNeutraliseMarkersAgreesWithRuneByRune(f *testing.F) {
	for _, s := range []string{"", "ok", "--- delegate x", "a\n--- end delegate \n--- delegate ", "\xff\r--- delegate",
		"a\u2028--- end delegate x\u2029--- delegate y", "\xe2\x80\n--- delegate", "--- delegate --- delegate \r\n--- end delegate "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		require.Equal(t, neutraliseMarkersRuneByRune(s), neutraliseMarkers(s))
	})
}

func TestNeutraliseMarkersKeepsATextWithoutMarkers(t *testing.T) {
	text := strings.Repeat("a result line\n-- not a marker\u2028", 10)
	require.Equal(t, text, neutraliseMarkers(text))
	require.Zero(t, testing.AllocsPerRun(10, func() { _ = neutraliseMarkers(text) }))
}

func TestJSNumberPrintsAsJavaScript(t *testing.T) {
	for f, want := range map[float64]string{
		1000000: "1000000", 86401: "86401", 0.5: "0.5", 1.5: "1.5", 0: "0", -3: "-3",
		1e21: "1e+21", 1.5e300: "1.5e+300", 1e-7: "1e-7", 0.000001: "0.000001", 123456789012345680000: "123456789012345680000",
		math.Inf(1): "Infinity", math.Inf(-1): "-Infinity", math.NaN(): "NaN",
	} {
		require.Equal(t, want, jsNumber(f), "%v", f)
	}
}

// BenchmarkFence is what fencing a settlement's result costs the writer:
// a result text of a few lines, none starting like a marker.
func BenchmarkFence(b *testing.B) {
	text := "done: 14 call sites, 3 of them on the hot path\nsee the notes below\n- admission\n- settlement"
	b.ReportAllocs()
	for b.Loop() {
		_ = fence("gc-0f1e2d3c", "ok", text)
	}
}
