package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// listCases are arrays whose spaces, escapes and nested values a scanner could mistake for the array's own commas
// and brackets.
var listCases = []string{
	`[]`, `[ ]`, `["a"]`, `[ "a" , "b" ,"c"]`, "[\n\t\"a\\\"],[{\",\r\n null ,\"\\\\\"]", `[null,null]`,
	`["a",1]`, `[-1,"a"]`, `["a",true]`, `[false]`, `["a",["b"]]`, `[{"a":["]"]},"b"]`, `["a",{"b":"}"}]`,
	`["[", "]", "{", "}", ","]`, `["\u2028", "\"", "\\"]`, `[1.5e-3 ,2]`, `[[],{},[[]]]`, `["a" ]`, `[ null ]`,
}

// requireListPrefixAgrees requires ListPrefix to tell the arrays json.Unmarshal reads into a []string, and its cut
// to leave the array of their first n elements, for arr, valid JSON.
func requireListPrefixAgrees(t *testing.T, arr string, n int) {
	t.Helper()
	var whole []string
	wantStrs := json.Unmarshal([]byte(arr), &whole) == nil
	cut, strs := ListPrefix([]byte(arr), n)
	require.Equal(t, wantStrs, strs, "%s", arr)
	require.LessOrEqual(t, cut, len(arr), "%s", arr)
	if !wantStrs {
		return
	}
	prefix := []byte(arr)
	if cut < len(arr) {
		require.Equal(t, byte(','), arr[cut], "%s cut at %d", arr, cut)
		prefix = append(prefix[:cut:cut], ']')
	}
	var got []string
	require.NoError(t, json.Unmarshal(prefix, &got), "%s cut at %d", arr, cut)
	require.Equal(t, whole[:min(n, len(whole))], got, "%s, %d", arr, n)
}

// TestListPrefixAgreesWithUnmarshal: ListPrefix tells the arrays json.Unmarshal reads into a []string, whatever
// their spaces, escapes and nested values, and its cut leaves the array of their first n elements.
func TestListPrefixAgreesWithUnmarshal(t *testing.T) {
	for _, arr := range listCases {
		for n := 1; n <= 6; n++ {
			requireListPrefixAgrees(t, arr, n)
		}
	}
}

// TestListPrefixAllocatesNothing: a frame's worth of one-char strings, the list a hostile client sends to be refused
// for its count, is walked without an allocation, and cut after its n-th element.
func TestListPrefixAllocatesNothing(t *testing.T) {
	arr := []byte("[" + strings.Repeat(`"a",`, 60000) + `"a"]`)
	var cut int
	var strs bool
	require.Zero(t, testing.AllocsPerRun(10, func() { cut, strs = ListPrefix(arr, 65) }))
	require.True(t, strs)
	require.Equal(t, 1+65*4-1, cut)
}

// FuzzListPrefixAgreesWithUnmarshal: on every valid array ListPrefix agrees with json.Unmarshal (see
// TestListPrefixAgreesWithUnmarshal); on any other input it returns, within the input.
func FuzzListPrefixAgreesWithUnmarshal(f *testing.F) {
	for _, arr := range listCases {
		f.Add(arr, 2)
	}
	f.Fuzz(func(t *testing.T, arr string, n int) {
		n = int(uint(n)%8) + 1 // a bound is at least 1
		if !json.Valid([]byte(arr)) || !strings.HasPrefix(arr, "[") {
			cut, _ := ListPrefix([]byte(arr), n)
			require.LessOrEqual(t, cut, len(arr))
			return
		}
		requireListPrefixAgrees(t, arr, n)
	})
}
