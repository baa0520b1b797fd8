package daemon

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
)

// dialAdmin connects to the socket of the crewd whose data directory is dataDir as its operator, with the admin
// token crewd keeps there, and client options opts (nil: the client's defaults); the caller closes the client.
func dialAdmin(ctx context.Context, t *testing.T, dataDir, socket string, opts *client.Options) *client.Client {
	t.Helper()
	token, err := AdminToken(dataDir)
	require.NoError(t, err)
	cl, err := client.Dial(ctx, socket, client.Hello{Role: "admin", Token: token}, opts)
	require.NoError(t, err)
	return cl
}
