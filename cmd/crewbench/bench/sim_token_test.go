package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestSimNamesTheTokenFileCrewdRefused: sim and --dashboard run with the default --token-file against a crewd started
// with --data DIR send another crewd's admin token, which crewd refuses (auth). The error names the file sent and
// --token-file, where "hello rejected" alone left the operator to guess which token was wrong.
func TestSimNamesTheTokenFileCrewdRefused(t *testing.T) {
	sock, _, _ := simCrewd(t)
	other := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, os.WriteFile(other, []byte("an0ther-crewds-t0ken\n"), 0o600))

	var buf bytes.Buffer
	err := Simulate(context.Background(), SimOptions{Socket: sock, TokenFile: other, Duration: time.Second, Out: &buf})
	require.Equal(t, wire.CodeAuth, wire.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "refused the admin token in "+other)
	require.Contains(t, err.Error(), "--token-file")

	_, err = dashboardLink(context.Background(), sock, other)
	require.Equal(t, wire.CodeAuth, wire.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "refused the admin token in "+other)
	require.Contains(t, err.Error(), "--token-file")
}
