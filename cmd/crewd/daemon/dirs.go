package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// checkPrivateDir refuses a directory that this user does not own, or that group or others may read, write or
// enter: the data directory holds admin.token, server.key and the store, so one that others may reach may already
// have leaked them. It is never chmod-ed: the owner decides (and rotates the secrets if they have leaked). A
// directory that does not exist passes (the store, which Pebble makes inside a data directory already checked; the
// data directory itself is made first, by MakePrivateDir). Symlinks are followed: where the data lives is the
// operator's choice, and the directory reached is the one checked.
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
			"chmod 700 it (crewd does not change it for you; rotate admin.token and server.key if others may have "+
			"read them)", dir, perm)
	}
	return nil
}

// MakePrivateDir makes dir, and any missing parent, for this user only, then checks what is there and syncs the
// entries of the directories it made. Made first and checked after: a directory that someone else made at that path
// in between (a --data in a shared parent such as /tmp) is then refused as any other foreign or loose directory is,
// where a look before the mkdir would have found nothing and the mkdir would have taken it as its own. An existing
// directory is left as it is. crewd makes its data directory so, and crewctl the data directory it restores or copies
// a store into.
func MakePrivateDir(dir string) error {
	beforeMakeDir(dir)
	made := MissingDirs(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("daemon: data directory: %w", err)
	}
	if err := checkPrivateDir(dir); err != nil {
		return err
	}
	// NB: a new directory's entry is durable only once its parent is synced: without it a crash could take away the
	// data directory after a secret, a token or a copy written in it was reported written.
	for _, d := range made {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// MissingDirs lists dir and those of its parents that do not exist, outermost first: the directories MkdirAll
// would make.
func MissingDirs(dir string) []string {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
		missing = append([]string{d}, missing...)
		if filepath.Dir(d) == d {
			break
		}
	}
	return missing
}

// beforeMakeDir is called as a private directory is about to be made: tests make one there themselves, as another
// user could in a shared parent.
var beforeMakeDir = func(string) {}
