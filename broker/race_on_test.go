//go:build race

package broker

// raceDetector is set when the tests run under the race detector, whose build allocates where crewd's does not
// (slices.Grow makes its room apart and then copies it), so what a frame's encoding allocates is not crewd's.
const raceDetector = true
