package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestAHelloRefusedNamesTheTokenFileSent: crewd started with --data DIR and crewctl run without it sends the admin
// token of the default data directory, which crewd refuses (auth). The error names the file that was sent and the
// flag that names crewd's, where a bare "hello rejected" left the operator to guess which token was wrong; a dial that
// fails otherwise (crewd not running) gets no such advice.
func TestAHelloRefusedNamesTheTokenFileSent(t *testing.T) {
	data := t.TempDir()
	tok := filepath.Join(data, adminTokenFile)
	require.NoError(t, writeFile(tok, "an0ther-crewds-t0ken"))
	root, err := filepath.Abs(filepath.Join("..", "..", "migrations", "picrew", "testdata", "root"))
	require.NoError(t, err)
	refused := func(context.Context, string, string) (Broker, error) {
		return nil, fmt.Errorf("client: hello: %w", wire.NewError(wire.CodeAuth, "hello rejected"))
	}
	for _, args := range [][]string{
		{"runs"},
		{"dashboard"},
		{"import", "picrew", root, "--follow"},
	} {
		t.Run(args[0], func(t *testing.T) {
			r := crewctl(t, refused, append(args, "--data", data, "--socket", "crewd.sock")...)
			require.Equal(t, exitOpen, r.code, r.err)
			require.Contains(t, r.err, "refused the admin token in "+tok)
			require.Contains(t, r.err, "--data")

			r = crewctl(t, nil, append(args, "--data", data, "--socket", "crewd.sock")...)
			require.Equal(t, exitOpen, r.code, r.err)
			require.NotContains(t, r.err, "refused the admin token")
		})
	}
}
