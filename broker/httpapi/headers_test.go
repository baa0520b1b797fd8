package httpapi

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAuthenticatedAnswersAreNotStored: every answer a credential opened (the data routes, the stream, /metrics)
// says no-store, so no browser or proxy cache keeps what only a credential may read.
func TestAuthenticatedAnswersAreNotStored(t *testing.T) {
	f := newFixture(t, Options{Metrics: NewMetrics()})
	for _, path := range everyRoute {
		t.Run(path, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel() // ends the stream
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.web.URL+path, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+adminToken)
			resp, err := f.web.Client().Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
		})
	}
}
