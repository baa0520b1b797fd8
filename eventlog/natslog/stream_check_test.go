package natslog

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// A stream of the log's name that exists already is bound as it is, and refused when it is not fit to hold the log
// (checkStream): a stream in memory loses every acknowledged group when its servers restart, one that does not allow
// atomic batch publish refuses every group of more than one message, and one with other subjects is no crewlog log.
// Each is refused when a node opens it, whether it would have created it or asks for an existing one, naming what is
// wrong, rather than bound and failing at the first commit, or losing what it acknowledged.
func TestAStreamUnfitForALogIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config jetstream.StreamConfig
		says   string
	}{
		{"in memory", jetstream.StreamConfig{Storage: jetstream.MemoryStorage, AllowAtomicPublish: true},
			"does not use file storage"},
		{"without atomic publish", jetstream.StreamConfig{Storage: jetstream.FileStorage},
			"does not allow atomic batch publish"},
		{"with other subjects", jetstream.StreamConfig{Storage: jetstream.FileStorage, AllowAtomicPublish: true,
			Subjects: []string{testConfig.Subject(), "elsewhere.>"}}, "has subjects"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := connect(t, startServer(t))
			ctx := context.Background()
			sc := tc.config
			sc.Name, sc.Replicas = testConfig.Stream, 1
			if sc.Subjects == nil {
				sc.Subjects = []string{testConfig.Subject(), testConfig.eventsWildcard()}
			}
			_, err := js.CreateStream(ctx, sc)
			require.NoError(t, err)

			existing := testConfig
			existing.Existing = true
			for _, c := range []Config{testConfig, existing} {
				_, err = Open(ctx, js, openLocal(t), c)
				require.ErrorContains(t, err, tc.says, "existing %v", c.Existing)
			}
		})
	}
}
