package broker

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// import.checkpoints pages its checkpoints in path order. Its cursor was the path of a page's last checkpoint: up to
// 4096 chars, sent again beside that checkpoint, so that in a small frame a checkpoint whose path took more than
// half of a page ended no page — one long path after another was oversize-frame at every read, and a follower, which
// reads them all when it starts, could not start. A path longer than a short cursor is named by a digest instead,
// which takes a few dozen bytes whatever the path.

// checkpointCursorPrefix starts a cursor that names a path by its digest (checkpointCursor).
const checkpointCursorPrefix = "sha256:"

// maxPathCursorBytes is the most bytes a path takes in JSON to be its own cursor: what the other pages' cursors
// may take (omitRoom).
const maxPathCursorBytes = omitRoom

// checkpointCursor is the cursor of a page of import.checkpoints that ends at path: the path itself when it is
// short, else the prefix and the hex of the first 16 bytes of the path's sha-256.
func checkpointCursor(path string) string {
	if jsonLen(path) <= maxPathCursorBytes {
		return path
	}
	return digestCursor(path)
}

// digestCursorLen is the length of every digestCursor: the prefix and 16 bytes in hex.
const digestCursorLen = len(checkpointCursorPrefix) + 2*16

func digestCursor(path string) string {
	sum := sha256.Sum256([]byte(path))
	return checkpointCursorPrefix + hex.EncodeToString(sum[:16])
}

// checkpointsAfter is the newest checkpoint of every file of source in set, in path order, after cursor: after the
// path whose digest it names (digestCursor), or, for any other cursor (a path), after that path. NB: a digest is
// found by computing every path's, in the order Of sorts them: the list is read and sorted whole at every page
// already, and a checkpoint once recorded stays in it, so the path a cursor names is always found.
func checkpointsAfter(set *projections.ImportCheckpoints, source, cursor string) []events.ImportCheckpoint {
	all := set.Of(source, "")
	if len(cursor) == digestCursorLen && strings.HasPrefix(cursor, checkpointCursorPrefix) {
		for i, ck := range all {
			if digestCursor(ck.Path) == cursor {
				return all[i+1:]
			}
		}
	}
	return all[sort.Search(len(all), func(i int) bool { return all[i].Path > cursor }):]
}
