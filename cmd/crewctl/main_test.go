package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/eventlog"
)

// rewrite regenerates the golden files under testdata/ from the current
// output; review the diff before committing.
var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata/")

// The scenario store is generated once per test process, by the real
// engine with a fixed clock and ids (audittest.Scenario), into a temporary
// directory: committing Pebble files would bloat the repository and break
// on any change of the store format, while the generator gives the same
// events, positions and hashes on every run.
var scenario struct {
	once sync.Once
	dir  string // a crewd data directory: dir/store
	head uint64
}

func scenarioData(t *testing.T) string {
	scenario.once.Do(func() {
		dir, err := os.MkdirTemp("", "crewctl-scenario-")
		require.NoError(t, err)
		scenario.dir = dir
		scenario.head = audittest.Scenario(t, filepath.Join(dir, storeDir))
	})
	require.NotEmpty(t, scenario.dir)
	return scenario.dir
}

func TestMain(m *testing.M) {
	if k := os.Getenv(killedEnv); k != "" {
		killableCrewctl(k)
	}
	if args := os.Getenv(crewdEnv); args != "" {
		crewdMain(args)
	}
	flag.Parse()
	code := m.Run()
	if scenario.dir != "" {
		os.RemoveAll(scenario.dir)
	}
	os.Exit(code)
}

// result is one crewctl invocation.
type result struct {
	code     int
	out, err string
}

// crewctl runs the command tree in-process, with dial as the way to crewd.
func crewctl(t *testing.T, dial dialer, args ...string) result {
	t.Helper()
	return crewctlWith(dial, nil, args...)
}

// crewctlOn runs the command tree in-process with a.open, the offline commands' read-only open, using opts, as a
// test that injects faults into its file system needs; crewd is not reached.
func crewctlOn(t *testing.T, opts *eventlog.Options, args ...string) result {
	t.Helper()
	return crewctlWith(nil, opts, args...)
}

// crewctlWith runs the command tree in-process with dial as the way to crewd (nil: none) and opts as the store's
// options (app.storeOpts).
func crewctlWith(dial dialer, opts *eventlog.Options, args ...string) result {
	if dial == nil {
		dial = func(context.Context, string, string) (Broker, error) { return nil, os.ErrNotExist }
	}
	var out, errb bytes.Buffer
	code := (&app{io: stdio{out: &out, err: &errb}, dial: dial, storeOpts: opts}).run(context.Background(), args)
	return result{code: code, out: out.String(), err: errb.String()}
}

// golden compares got with testdata/name, or rewrites it with -rewrite.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *rewrite {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run with -rewrite")
	require.Equal(t, string(want), got, "output differs from %s (rerun with -rewrite and review the diff)", path)
}

// scrub replaces a temporary directory in output with a fixed word, so
// goldens never hold a path of the machine that ran them.
func scrub(s, dir, word string) string { return strings.ReplaceAll(s, dir, word) }

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }
