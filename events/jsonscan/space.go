package jsonscan

// space marks the bytes JSON allows between tokens. NB: a table, as the validator of every frame (broker/wire) asks
// for each byte between two tokens.
var space = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// IsSpace reports whether c is JSON whitespace: space, tab, newline or carriage return.
func IsSpace(c byte) bool { return space[c] }

// SkipSpace returns the index of the first byte of b at or after i that is no JSON whitespace (len(b) if none).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && space[b[i]] {
		i++
	}
	return i
}
