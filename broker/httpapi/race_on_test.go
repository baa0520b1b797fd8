//go:build race

package httpapi

// raceDetector is set when the tests run under the race detector. Pebble then copies every value an iterator
// hands out (to catch a reader that keeps one past its step), so what a read allocates is not what it allocates
// in crewd.
const raceDetector = true
