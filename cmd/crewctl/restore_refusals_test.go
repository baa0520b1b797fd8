package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/eventlog/stagingtest"
)

// TestRestoreRefusesATargetHoldingAnything: restore never overwrites anything: a target holding one entry, or more,
// is refused before the copy (exit 2, not empty) and left as it was; only a server.key alone with the backup's own
// bytes, as a killed restore of that backup leaves it, is taken as the restore's.
func TestRestoreRefusesATargetHoldingAnything(t *testing.T) {
	backup := filepath.Join(t.TempDir(), "backup")
	require.Equal(t, exitOK, crewctl(t, nil, "backup", backup, "--data", scenarioData(t)).code)
	key := strings.Repeat("k", 32)
	require.NoError(t, os.WriteFile(filepath.Join(backup, serverKeyFile), []byte(key), 0o600))
	for _, tc := range []struct {
		name  string
		files map[string]string // what the target holds before the restore
	}{
		{"one file", map[string]string{"notes.txt": "theirs"}},
		{"another server.key", map[string]string{serverKeyFile: strings.Repeat("x", 32)}},
		{"the backup's server.key and more", map[string]string{serverKeyFile: key, "notes.txt": "theirs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "restored")
			require.NoError(t, os.Mkdir(target, 0o700))
			var names []string
			for name, content := range tc.files {
				require.NoError(t, os.WriteFile(filepath.Join(target, name), []byte(content), 0o600))
				names = append(names, name)
			}
			r := crewctl(t, nil, "restore", backup, "--data", target)
			require.Equal(t, exitUsage, r.code, r.out+r.err)
			require.Contains(t, r.err, target+" is not empty; restore only into an empty or new directory")
			require.ElementsMatch(t, names, stagingtest.Names(t, target), "nothing is added")
			for name, content := range tc.files {
				got, err := os.ReadFile(filepath.Join(target, name))
				require.NoError(t, err)
				require.Equal(t, content, string(got), "left as it was")
			}
		})
	}
	t.Run("the backup's server.key alone", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "restored")
		require.NoError(t, os.Mkdir(target, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(target, serverKeyFile), []byte(key), 0o600))
		r := crewctl(t, nil, "restore", backup, "--data", target)
		require.Equal(t, exitOK, r.code, r.out+r.err)
		require.ElementsMatch(t, []string{storeDir, serverKeyFile}, stagingtest.Names(t, target))
	})
}

// TestRestoreOfADamagedBackupCopiesNothing: a backup that fails its verification is not copied: restore exits 1
// saying nothing was restored, and the data directory it would have made is not left behind.
func TestRestoreOfADamagedBackupCopiesNothing(t *testing.T) {
	backup := t.TempDir()
	audittest.Scenario(t, filepath.Join(backup, storeDir))
	rewriteRecord(t, filepath.Join(backup, storeDir), 20, func(rec []byte) { rec[len(rec)/2] ^= 0x01 })
	target := filepath.Join(t.TempDir(), "restored")
	r := crewctl(t, nil, "restore", backup, "--data", target)
	require.Equal(t, exitProblem, r.code, r.out+r.err)
	require.Contains(t, r.out, "CORRUPT at position 20")
	require.Contains(t, r.err, "failed verification; nothing restored")
	require.NoDirExists(t, target)
}
