package commands

import (
	"strings"
	"unicode/utf8"
)

// MaxResultChars bounds a delegate's result text in the fence (D§6.2).
const MaxResultChars = 65536

// fence wraps a grandchild's result for delivery to its parent (D§6.2): the
// text cannot forge the end marker, because every line that starts like a
// marker is rewritten, and it is cut to MaxResultChars.
//
//	--- delegate <subId> (<tag>) ---
//	<text>
//	--- end delegate <subId> ---
func fence(subID, tag, text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "--- delegate ") || strings.HasPrefix(l, "--- end delegate ") {
			lines[i] = "-- ~delegate " + strings.TrimPrefix(strings.TrimPrefix(l, "--- end delegate "), "--- delegate ")
		}
	}
	body := strings.Join(lines, "\n")
	if utf8.RuneCountInString(body) > MaxResultChars {
		body = truncate(body, MaxResultChars)
	}
	return "--- delegate " + subID + " (" + tag + ") ---\n" + body + "\n--- end delegate " + subID + " ---"
}
