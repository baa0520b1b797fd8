package commands

import (
	"math"
	"strconv"
	"strings"
)

// jsNumber formats f as JavaScript's String(number) does, so that messages
// that quote a number read as pi-crew's: integers without an exponent up to
// 1e21 (1000000, not 1e+06), shortest round-trip digits, and an exponent
// without padding below 1e-6 or from 1e21 on (1e-7, 1e+21).
func jsNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0" // -0 too, as JavaScript
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // e.g. 1e-07, 1.5e+21
	mant, exp, _ := strings.Cut(s, "e")
	sign := exp[:1]
	digits := strings.TrimLeft(exp[1:], "0")
	return mant + "e" + sign + digits
}
