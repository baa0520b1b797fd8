package httpapi

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
)

// TestOptionsMaxConns: MaxConns must exceed MaxStreams, and the connections one credential can hold with
// requests in progress (never closed to make room): 4 reads in progress, 8 waiting and its streams, so that
// another credential always finds a place. The default is valid.
func TestOptionsMaxConns(t *testing.T) {
	const reads = maxReadsPerCredential + maxWaitingReadsPerCredential
	for _, tc := range []struct {
		name string
		opts Options
		want []string // every problem reported; none: valid
	}{
		{"defaults", Options{}, nil},
		{"one place beyond a credential's", Options{MaxConns: reads + 64 + 1, MaxStreams: reads + 64}, nil},
		{"a credential's places fill every one", Options{MaxConns: reads + 64, MaxStreams: reads + 63},
			[]string{"MaxConns 76 must exceed the 76 connections one credential can hold (4 reads in progress + 8 waiting + 64 streams"}},
		{"fewer streams in all than per credential", Options{MaxConns: reads + 5, MaxStreams: 4}, nil},
		{"fewer streams in all, filled", Options{MaxConns: reads + 4, MaxStreams: 4, MaxStreamsPerPrincipal: 4},
			[]string{"MaxConns 16 must exceed the 16 connections one credential can hold (4 reads in progress + 8 waiting + 4 streams"}},
		{"one stream per credential", Options{MaxConns: reads + 2, MaxStreams: 1, MaxStreamsPerPrincipal: 1}, nil},
		{"below a credential's, above the streams", Options{MaxConns: 40, MaxStreams: 32},
			[]string{"MaxConns 40 must exceed the 44 connections one credential can hold (4 reads in progress + 8 waiting + 32 streams"}},
		{"no more than the streams", Options{MaxConns: 10, MaxStreams: 10}, []string{
			"MaxConns 10 must exceed MaxStreams 10",
			"MaxConns 10 must exceed the 22 connections one credential can hold",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Engine, tc.opts.Log = &commands.Engine{}, &eventlog.Log{}
			err := tc.opts.validate()
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			var joined interface{ Unwrap() []error }
			require.ErrorAs(t, err, &joined)
			require.Len(t, joined.Unwrap(), len(tc.want), "no other problem: %v", err)
		})
	}
}
