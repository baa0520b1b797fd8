package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// The defaults are crewd's own, so crewctl with no flags finds the daemon
// and the store a crewd with no flags uses.

// defaultDataDir is $XDG_DATA_HOME/crewlog, else ~/.local/share/crewlog.
func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "crewlog")
	}
	if h := os.Getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "share", "crewlog")
	}
	return ""
}

// defaultSocket is $XDG_RUNTIME_DIR/crewlog/crewd.sock, else
// <os.TempDir()>/crewlog-<uid>/crewd.sock.
func defaultSocket() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return filepath.Join(d, "crewlog", "crewd.sock")
	}
	tmp := os.TempDir()
	if !filepath.IsAbs(tmp) {
		tmp = "/tmp"
	}
	return filepath.Join(tmp, fmt.Sprintf("crewlog-%d", os.Getuid()), "crewd.sock")
}

// adminTokenFile is the admin credential crewd writes into its data
// directory.
const adminTokenFile = "admin.token"

// Inside crewd's data directory.
const (
	storeDir      = "store"      // the event log
	serverKeyFile = "server.key" // keys the tokens crewd mints; kept with a backup so they stay valid
)

// storePath is the store of a data directory: <data>/store, or the
// directory itself when it is a bare store (a Pebble checkpoint).
func storePath(data string) string {
	if data == "" {
		return ""
	}
	if st, err := os.Stat(filepath.Join(data, storeDir)); err == nil && st.IsDir() {
		return filepath.Join(data, storeDir)
	}
	return data
}
