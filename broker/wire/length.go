package wire

// UTF16Len returns the length of s as JavaScript's String.prototype.length counts it: UTF-16 code units, so a
// character outside the Basic Multilingual Plane counts two. pi-crew states every text limit (ids 1..256, bodies
// ≤ 262144, …) in these units; measuring bytes or runes instead would accept or refuse different inputs than
// pi-crew does. Invalid UTF-8 bytes count one each (they decode to U+FFFD).
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}
