// Package jsonstring appends a string to a byte slice as encoding/json.Marshal encodes it, byte for byte, without
// reflection and without an allocation of its own: the one implementation behind the commands' results, which
// commands encodes, and the broker's pushes and pages (broker/wire), which may not import each other. A leaf: it
// imports nothing of crewlog.
package jsonstring
