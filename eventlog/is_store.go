package eventlog

import "path/filepath"

// IsStore reports whether dir holds a store: Pebble's OPTIONS file, which it writes when it makes one.
func IsStore(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "OPTIONS-*"))
	return len(m) > 0
}

// HasManifestMarker reports whether dir holds the marker naming a Pebble store's current manifest, which a store
// keeps even when other files of it are gone: a reader tells a damaged store from no store by it.
func HasManifestMarker(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "marker.manifest.*"))
	return len(m) > 0
}
