package main

import (
	"os"
	"path/filepath"

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
)

// The defaults are crewd's own (package daemon), so crewctl with no flags
// finds the daemon and the store a crewd with no flags uses.

func defaultDataDir() string { return daemon.DefaultDataDir(daemon.OSEnv()) }

func defaultSocket() string { return daemon.DefaultSocketPath(daemon.OSEnv()) }

// Inside crewd's data directory.
const (
	adminTokenFile = daemon.AdminTokenFile // the admin credential crewd writes
	storeDir       = daemon.StoreDir       // the event log
	serverKeyFile  = daemon.ServerKeyFile  // keys the tokens crewd mints; kept with a backup so they stay valid
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
