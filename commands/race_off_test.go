//go:build !race

package commands

// raceDetector is set when the tests run under the race detector (race_on_test.go).
const raceDetector = false
