package projections

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// maxSnapshotDepth bounds the nesting of a snapshot; the real format nests
// about 8 deep.
const maxSnapshotDepth = 32

var errTruncated = errors.New("truncated")

// checkMsgpack verifies that b is exactly `values` well-formed msgpack values
// and that every declared length is backed by bytes that are actually there,
// without allocating per value.
//
// NB: this is what makes decoding untrusted bytes safe. msgpack allocates
// slices of structs from the declared array length before reading elements,
// so a 5-byte header claiming 2^32 elements would otherwise ask the runtime
// for terabytes, a fatal error no recover can catch. After this check every
// container's length is at most len(b) (each element takes at least a byte).
func checkMsgpack(b []byte, values int) error {
	end, err := msgpackEnd(b, 0, values, 0)
	if err == nil && end != len(b) {
		err = fmt.Errorf("%d trailing bytes", len(b)-end)
	}
	return err
}

// msgpackEnd returns where the `values` well-formed msgpack values that
// start at b[i] end, checking them as checkMsgpack does; depth containers
// enclose them, which count towards maxSnapshotDepth as in a check of the
// whole.
func msgpackEnd(b []byte, i, values, depth int) (int, error) {
	stack := []int{values} // items still to read at each open level
	need := func(n int) error {
		if n < 0 || n > len(b)-i {
			return errTruncated
		}
		return nil
	}
	// size reads an n-byte big-endian length.
	size := func(n int) (int, error) {
		if err := need(n); err != nil {
			return 0, err
		}
		var v uint64
		switch n {
		case 1:
			v = uint64(b[i])
		case 2:
			v = uint64(binary.BigEndian.Uint16(b[i:]))
		case 4:
			v = uint64(binary.BigEndian.Uint32(b[i:]))
		}
		i += n
		if v > uint64(len(b)) {
			return 0, errTruncated
		}
		return int(v), nil
	}
	for len(stack) > 0 {
		top := len(stack) - 1
		if stack[top] == 0 {
			stack = stack[:top]
			continue
		}
		stack[top]--
		if err := need(1); err != nil {
			return 0, err
		}
		c := b[i]
		i++
		skip, items := 0, -1 // bytes of data to skip; items of a container
		var err error
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c <= 0x8f:
			items = 2 * int(c&0x0f)
		case c <= 0x9f:
			items = int(c & 0x0f)
		case c <= 0xbf:
			skip = int(c & 0x1f)
		case c == 0xc4 || c == 0xd9:
			skip, err = size(1)
		case c == 0xc5 || c == 0xda:
			skip, err = size(2)
		case c == 0xc6 || c == 0xdb:
			skip, err = size(4)
		case c == 0xc7:
			skip, err = size(1)
			skip++ // the ext type byte
		case c == 0xc8:
			skip, err = size(2)
			skip++
		case c == 0xc9:
			skip, err = size(4)
			skip++
		case c == 0xca:
			skip = 4
		case c == 0xcb:
			skip = 8
		case c >= 0xcc && c <= 0xcf:
			skip = 1 << (c - 0xcc)
		case c >= 0xd0 && c <= 0xd3:
			skip = 1 << (c - 0xd0)
		case c >= 0xd4 && c <= 0xd8:
			skip = 1 + 1<<(c-0xd4)
		case c == 0xdc:
			items, err = size(2)
		case c == 0xdd:
			items, err = size(4)
		case c == 0xde:
			items, err = size(2)
			items *= 2
		case c == 0xdf:
			items, err = size(4)
			items *= 2
		default: // 0xc1 is never used
			return 0, fmt.Errorf("invalid code 0x%x at %d", c, i-1)
		}
		if err != nil {
			return 0, err
		}
		if items > 0 {
			if err := need(items); err != nil {
				return 0, err
			}
			if len(stack)+depth > maxSnapshotDepth {
				return 0, fmt.Errorf("nested deeper than %d", maxSnapshotDepth)
			}
			stack = append(stack, items)
			continue
		}
		if err := need(skip); err != nil {
			return 0, err
		}
		i += skip
	}
	return i, nil
}
