package commands

// listPrefix reads arr, a JSON array (as the params a command is parsed from are valid JSON), for a parse that keeps
// its first n elements: cut is len(arr) when arr holds at most n, else the index of the comma after its n-th element,
// so that arr[:cut] and a closing bracket are the array of those n; strs reports whether every element of arr is a
// string or null, what json.Unmarshal reads into a []string. NB: nothing is allocated, however many elements arr has.
func listPrefix(arr []byte, n int) (cut int, strs bool) {
	cut, strs = len(arr), true
	count := 0
	i := skipSpace(arr, 1) // after the opening bracket
	for strs && i < len(arr) && arr[i] != ']' {
		strs = arr[i] == '"' || arr[i] == 'n'
		i = skipSpace(arr, valueEnd(arr, i))
		if count++; count == n && i < len(arr) && arr[i] == ',' {
			cut = i
		}
		if i < len(arr) && arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
	return cut, strs
}

// valueEnd is the index just past the JSON value that starts at b[i].
func valueEnd(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '[', '{':
			depth++
		case ']', '}':
			if depth == 0 {
				return i
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// skipSpace is the index of the first byte at or after i of b that is no JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
