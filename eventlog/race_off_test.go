//go:build !race

package eventlog

// raceDetector: see race_on_test.go.
const raceDetector = false
