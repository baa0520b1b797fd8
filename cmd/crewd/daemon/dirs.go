package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// checkPrivateDir refuses a directory that this user does not own, or that group or others may read, write or
// enter: the data directory holds admin.token, server.key and the store, so one that others may reach may already
// have leaked them. It is never chmod-ed: the owner decides (and rotates the secrets if they have leaked). A
// directory that does not exist passes. Symlinks are followed: where the data lives is the operator's choice, and
// the directory reached is the one checked.
func checkPrivateDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("daemon: %s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("daemon: %s belongs to uid %d, not to crewd's uid %d", dir, st.Uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("daemon: %s has mode %04o: group or others may reach the store and the secrets in it; "+
			"chmod 700 it (crewd does not change it for you; rotate admin.token and server.key if others may have read them)", dir, perm)
	}
	return nil
}
