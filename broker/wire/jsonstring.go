package wire

import "github.com/crewlog/crewlog/events/jsonstring"

// AppendJSONString appends s as json.Marshal encodes a string, byte for byte, allocating only when dst has no room
// (jsonstring.Append, which the commands' results use too).
func AppendJSONString(dst []byte, s string) []byte {
	return jsonstring.Append(dst, s)
}
