package eventlog

import "path/filepath"

// IsStore reports whether dir holds a store: Pebble's OPTIONS file, which it writes when it makes one.
func IsStore(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "OPTIONS-*"))
	return len(m) > 0
}
