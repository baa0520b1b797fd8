//go:build race

package commands

// raceDetector is set when the tests run under the race detector, whose sync.Pool drops a quarter of what is put
// back on purpose, so a parse that borrows encoding/json's pooled scanner (a msg.send's body compacted) makes a new
// one now and then, where crewd's build reuses it.
const raceDetector = true
