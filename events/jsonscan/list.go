package jsonscan

// ListPrefix reads arr, a JSON array in valid JSON, for a parse that keeps its first n elements: cut is len(arr)
// when arr holds at most n elements, else the index of the comma after its n-th, so that arr[:cut] and a closing
// bracket are the array of those n; strs reports whether every element of arr is a string or null, what
// json.Unmarshal reads into a []string.
//
// Why: a client's list is bounded in count, and decoding a frame's worth of short strings before counting them cost
// megabytes of slices; a caller decodes arr[:cut] only, having learnt from strs whether the whole would have been
// refused for an element past the cut. NB: nothing is allocated, however many elements arr has.
func ListPrefix(arr []byte, n int) (cut int, strs bool) {
	cut, strs = len(arr), true
	count := 0
	i := SkipSpace(arr, 1) // after the opening bracket
	for strs && i < len(arr) && arr[i] != ']' {
		strs = arr[i] == '"' || arr[i] == 'n'
		i = SkipSpace(arr, SkipValue(arr, i))
		if count++; count == n && i < len(arr) && arr[i] == ',' {
			cut = i
		}
		if i < len(arr) && arr[i] == ',' {
			i = SkipSpace(arr, i+1)
		}
	}
	return cut, strs
}
