package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// methodAdminCheckpoint is the online backup: the store is locked by the daemon, so an offline tool cannot copy
// it while crewd runs; the daemon takes the checkpoint itself.
const methodAdminCheckpoint = "admin.checkpoint"

type checkpointResult struct {
	Dir  string `json:"dir"`
	Head uint64 `json:"head"`
	// ServerKeyID is ServerKeyID of the daemon's server key: the key the copy's tokens need, which the checkpoint
	// does not hold (it lives beside the store, not in it).
	ServerKeyID string `json:"serverKeyId"`
}

// handleCheckpoint: admin only, {dir} → {dir, head}. It writes a consistent copy of the store to dir
// (eventlog.Log.Checkpoint) while the engine keeps committing. dir must be absolute, since the daemon's working
// directory is not the caller's, and must not exist, so nothing is ever overwritten; its parent must exist; and it
// must not lie inside the store, where Pebble's files are (eventlog.ErrInsideStore); and the disk must have room for
// the copy (checkpointRoom), or it is refused disk-full. head is the durable head when the checkpoint began: the copy
// holds at least that much. serverKeyId names the daemon's server key (ServerKeyID), so that the caller can check the
// key file it keeps with the copy.
func handleCheckpoint(cl *call) (any, error) {
	if cl.c.id.role != events.RoleAdmin {
		return nil, forbidden("%s: admin only", cl.method)
	}
	p := readParams(cl)
	dir := p.str("dir", true, 4096)
	p.strict()
	if p.err != nil {
		return nil, p.err
	}
	if !filepath.IsAbs(dir) {
		return nil, badParams(cl.method, "dir must be an absolute path")
	}
	dir = filepath.Clean(dir)
	if _, err := os.Lstat(dir); err == nil {
		return nil, badParams(cl.method, "dir %s exists; name a new directory", dir)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, badParams(cl.method, "dir %s: %v", dir, err)
	}
	if st, err := os.Stat(filepath.Dir(dir)); err != nil || !st.IsDir() {
		return nil, badParams(cl.method, "the parent of dir %s is not a directory", dir)
	}
	head, _ := cl.c.s.log.Head()
	err := cl.c.s.checkpointRoom(dir)
	if err == nil {
		err = cl.c.s.log.Checkpoint(dir)
	}
	switch {
	case errors.Is(err, eventlog.ErrInsideStore):
		return nil, badParams(cl.method, "dir %s is inside the store; name a directory outside it", dir)
	case errors.Is(err, commands.ErrNoSpace):
		return nil, err
	case errors.Is(err, fs.ErrExist):
		// NB: made since the check above (by another user, in a shared directory): the log checks again, and its
		// move of the copy into place refuses a dir made since its own check too (eventlog.RenameNoReplace).
		return nil, badParams(cl.method, "dir %s exists; name a new directory", dir)
	case err != nil:
		return nil, fmt.Errorf("broker: %s: %w", cl.method, err)
	}
	cl.c.s.lg.Info("checkpoint written", "dir", dir, "head", head)
	return checkpointResult{Dir: dir, Head: head, ServerKeyID: ServerKeyID(cl.c.s.opts.ServerKey)}, nil
}
