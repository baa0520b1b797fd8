package wire

// CutMember removes every top-level member named key from obj, a valid JSON value (the params of a decoded
// Request are), and returns the value of the last one (the one JSON.parse keeps) and obj without them. Keys
// match as decoded, so a key spelt with \u escapes matches too. found is false, and rest is obj itself, when obj
// is not an object or has no such member.
//
// The broker takes the optional commandId out of the params of every command this way: decoding the params to a
// map and encoding them again cost more than the command's own parse.
func CutMember(obj []byte, key string) (value, rest []byte, found bool) {
	i := after(obj, 0)
	if i == len(obj) || obj[i] != '{' {
		return nil, obj, false
	}
	var buf [16][2]int
	kept := buf[:0] // [start, end) of the members kept
	size := 2
	for i = after(obj, i+1); i < len(obj) && obj[i] == '"'; {
		start := i
		keyEnd := skipString(obj, i)
		i = after(obj, after(obj, keyEnd)+1) // past the colon
		valEnd := skipValue(obj, i)
		if keyIs(obj[start:keyEnd], key) {
			value, found = obj[i:valEnd], true
		} else {
			kept = append(kept, [2]int{start, valEnd})
			size += valEnd - start + 1
		}
		if i = after(obj, valEnd); i < len(obj) && obj[i] == ',' {
			i = after(obj, i+1)
		}
	}
	if !found {
		return nil, obj, false
	}
	rest = append(make([]byte, 0, size), '{')
	for j, m := range kept {
		if j > 0 {
			rest = append(rest, ',')
		}
		rest = append(rest, obj[m[0]:m[1]]...)
	}
	return value, append(rest, '}'), true
}
