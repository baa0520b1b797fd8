package daemon

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// maxSettingsFile bounds what crewd reads of --config and --picrew-config (1 MiB): a settings file is a few hundred
// bytes, and one named by mistake (a log, /dev/zero) is refused, not read into memory without end.
const maxSettingsFile = 1 << 20

// readSettingsFile returns the content of the settings file at path, which what names in errors ("config file"): a
// regular file of at most maxSettingsFile bytes. NB: opened without blocking, so a FIFO is refused, not waited on,
// and a file that grows while it is read is refused at the bound.
func readSettingsFile(what, path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("daemon: %s: %w", what, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("daemon: %s: %w", what, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("daemon: %s %s: not a regular file", what, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSettingsFile+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("daemon: %s: %w", what, err)
	case len(data) > maxSettingsFile:
		return nil, fmt.Errorf("daemon: %s %s is larger than %d bytes", what, path, maxSettingsFile)
	}
	return data, nil
}
