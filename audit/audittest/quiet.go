package audittest

import "fmt"

// QuietPebble is a Pebble logger for tests that open a store with Pebble directly: it keeps Pebble's recovery
// messages out of the test's output, and a fatal error still ends the test (a panic).
type QuietPebble struct{}

// Infof discards the line.
func (QuietPebble) Infof(string, ...any) {}

// Errorf discards the line.
func (QuietPebble) Errorf(string, ...any) {}

// Fatalf panics with the message: Pebble relies on it not returning.
func (QuietPebble) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
