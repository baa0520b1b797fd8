package commands

import "github.com/crewlog/crewlog/broker/wire"

// listPrefix reads arr, a JSON array (as the params a command is parsed from are valid JSON), for a parse that keeps
// its first n elements: cut is len(arr) when arr holds at most n, else the index of the comma after its n-th element,
// so that arr[:cut] and a closing bracket are the array of those n; strs reports whether every element of arr is a
// string or null, what json.Unmarshal reads into a []string. NB: nothing is allocated, however many elements arr has.
func listPrefix(arr []byte, n int) (cut int, strs bool) {
	cut, strs = len(arr), true
	count := 0
	i := wire.SkipSpace(arr, 1) // after the opening bracket
	for strs && i < len(arr) && arr[i] != ']' {
		strs = arr[i] == '"' || arr[i] == 'n'
		i = wire.SkipSpace(arr, wire.SkipValue(arr, i))
		if count++; count == n && i < len(arr) && arr[i] == ',' {
			cut = i
		}
		if i < len(arr) && arr[i] == ',' {
			i = wire.SkipSpace(arr, i+1)
		}
	}
	return cut, strs
}
