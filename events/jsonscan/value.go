package jsonscan

// SkipString returns the index after the string that starts at b[i] (its opening quote), in valid JSON.
func SkipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++ // the escaped byte, which may be a quote
		case '"':
			return i + 1
		}
	}
	return len(b) // NB: not i, which a backslash that ends invalid input leaves one past it
}

// SkipValue returns the index after the value that starts at b[i], in valid JSON: a string, an object or an array
// (whatever it nests), a number or a literal.
func SkipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0 // NB: valid JSON closes what it opens, so a count is enough: no stack of which is which
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = SkipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && !space[b[i]] {
		i++ // a number or a literal, which ends where a separator, a closing bracket or a space does
	}
	return i
}
