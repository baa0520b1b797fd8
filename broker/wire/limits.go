package wire

import "fmt"

// Frame size limits. A frame is one JSON object plus its terminating '\n', and the cap counts that newline, as
// pi-crew's MAX_BROKER_FRAME_BYTES does: with the default cap the longest line a peer may send has 262143 bytes
// before the newline. Both directions use the same definition, so a frame AppendFrame accepts is one Reader accepts.
const (
	// DefaultMaxFrame is pi-crew's fixed cap. NB: nothing negotiates the cap, and a pi-crew peer refuses a line
	// over 262144 bytes whatever crewlog is configured to, so a larger cap only helps crewlog's own clients.
	DefaultMaxFrame = 262144
	// MaxFrameFloor is the smallest configurable cap; it still fits a hello with 256-character ASCII credentials.
	MaxFrameFloor = 1024
	// MaxFrameCeiling is the largest configurable cap: it bounds what one connection can make the broker buffer.
	MaxFrameCeiling = 1048576
)

// ValidateMaxFrame reports whether n is a usable frame cap. Zero is not valid here: configuration that treats zero
// as "use the default" resolves it before calling this.
func ValidateMaxFrame(n int) error {
	if n < MaxFrameFloor || n > MaxFrameCeiling {
		return fmt.Errorf("wire: max frame %d bytes is outside %d..%d", n, MaxFrameFloor, MaxFrameCeiling)
	}
	return nil
}

// resolveMaxFrame maps the zero value to DefaultMaxFrame, so callers can pass an unset option straight through.
func resolveMaxFrame(n int) (int, error) {
	if n == 0 {
		return DefaultMaxFrame, nil
	}
	if err := ValidateMaxFrame(n); err != nil {
		return 0, err
	}
	return n, nil
}
