package events

import "fmt"

// TypeImportCheckpoint records how far an import has read one source file,
// so a follower that restarts (or a daemon that restarts under it) resumes
// where it stopped instead of reading the file again. It is written to
// ImportStream, never to a run's stream, and changes no projection.
const TypeImportCheckpoint = "import.checkpoint"

// ImportStream is the stream of import checkpoints. Run ids are limited to
// [A-Za-z0-9_-], so it cannot collide with a run (like EngineStream).
const ImportStream = "$import"

// MaxImportPathChars bounds an import checkpoint's Path, in Unicode code
// points as every string bound of the protocol counts: import.checkpoints
// hands a page's last path back as its cursor, which it reads up to this
// bound, so the engine records no longer path (commands.Import). It is the
// PATH_MAX of Linux; a pi-crew file's path is a few hundred bytes.
const MaxImportPathChars = 4096

// ImportCheckpoint is one file's read position. Path is relative to the
// imported root (slash-separated), so the log never names the machine the
// files were on. Offset is the byte just after the last complete line read
// (the whole size for a file that is rewritten as a whole, such as
// tasks.json); LastLineHash the hex SHA-256 of that line (of the whole file
// for a rewritten one), which tells on resume whether the file still holds
// what was read or was rewritten under the same name. Gone marks a file (or
// a run directory) that disappeared: its import stays in the log.
// Reconciled, on a run's manifest, says the run was reconciled with its
// files as of this manifest, so a restarted follower need not read the run
// again while nothing changes.
type ImportCheckpoint struct {
	Source       string `json:"source" msgpack:"source"`
	Path         string `json:"path" msgpack:"path"`
	Inode        int64  `json:"inode" msgpack:"inode"`
	Size         int64  `json:"size" msgpack:"size"`
	Offset       int64  `json:"offset" msgpack:"offset"`
	LastLineHash string `json:"lastLineHash,omitempty" msgpack:"lastLineHash,omitempty"`
	Lines        int64  `json:"lines,omitempty" msgpack:"lines,omitempty"`
	Gone         bool   `json:"gone,omitempty" msgpack:"gone,omitempty"`
	Reconciled   bool   `json:"reconciled,omitempty" msgpack:"reconciled,omitempty"`
}

// Validate reports what no import writes into a checkpoint: a negative
// offset, size or line count, or more lines than bytes before the offset
// (every line counted ends with a newline at or before it). A follower
// resumes reading a file at Offset on the checkpoint's word, so
// DecodePayload refuses such a payload (ErrBadPayload) rather than hand it
// on, and the engine refuses to record one. Offset may exceed Size: Size is
// the file's size when it was last looked at, and the file may have grown
// before it was read.
func (c *ImportCheckpoint) Validate() error {
	switch {
	case c.Offset < 0:
		return fmt.Errorf("events: import checkpoint of %.80q: offset %d is negative", c.Path, c.Offset)
	case c.Size < 0:
		return fmt.Errorf("events: import checkpoint of %.80q: size %d is negative", c.Path, c.Size)
	case c.Lines < 0:
		return fmt.Errorf("events: import checkpoint of %.80q: line count %d is negative", c.Path, c.Lines)
	case c.Lines > c.Offset:
		return fmt.Errorf("events: import checkpoint of %.80q: %d lines cannot end within its first %d bytes", c.Path,
			c.Lines, c.Offset)
	}
	return nil
}
