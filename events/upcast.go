package events

import "fmt"

// upcaster rewrites the msgpack bytes of a payload at one schema version into
// the bytes of the next version. Working on bytes keeps old payload structs
// out of the package: only the current struct of each type exists.
type upcaster func(b []byte) ([]byte, error)

type upcastKey struct {
	typ  string
	from uint16
}

// upcasters holds one entry per (type, version) that is no longer current.
// Every type is at version 1 today, so it is empty. To change a payload's
// shape: bump its version in registry.go and add here the step from the old
// version, e.g. {TypeDelegateAdmitted, 1}: admittedV1toV2.
var upcasters = map[upcastKey]upcaster{}

// upcast brings b from version from up to version to, one step at a time.
func upcast(t string, from, to uint16, b []byte) ([]byte, error) {
	for v := from; v < to; v++ {
		up := upcasters[upcastKey{typ: t, from: v}]
		if up == nil {
			return nil, fmt.Errorf("%w: %s v%d has no upcaster to v%d", ErrUnsupportedVersion, t, v, v+1)
		}
		var err error
		if b, err = up(b); err != nil {
			return nil, fmt.Errorf("%w: upcasting %s v%d: %v", ErrBadPayload, t, v, err)
		}
	}
	return b, nil
}
