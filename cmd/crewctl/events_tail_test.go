package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/broker/wire"
)

// tail runs events --follow against f until f's stream runs dry (then it is interrupted, as an operator's ^C
// would) or fails.
func tail(t *testing.T, f *fakeBroker, args ...string) result {
	t.Helper()
	tok := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, writeFile(tok, "t0ken"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.stop = cancel
	var out, errb strings.Builder
	code := run(ctx, append([]string{"events", "--follow", "--token-file", tok}, args...), stdio{out: &out, err: &errb},
		f.dial)
	return result{code: code, out: out.String(), err: errb.String()}
}

// TestEventsFollowSubscribesWithItsTypes: --type chooses the events the subscription sends as it chose those of the
// pages read before: a tail that asked for every type once it followed printed what --type left out.
func TestEventsFollowSubscribesWithItsTypes(t *testing.T) {
	const typ = "delegate.admitted"
	f := newFake(t)
	f.paged = 5
	var want []uint64
	for i, raw := range f.events[audittest.RunBudget] {
		if typeIn(raw, []string{typ}) {
			require.GreaterOrEqual(t, i, f.paged, "the subscription sends what is chosen")
			want = append(want, uint64(i+1))
		}
	}
	require.NotEmpty(t, want)

	r := tail(t, f, "--run", audittest.RunBudget, "--type", typ, "--json")
	require.Equal(t, exitOK, r.code, r.err)
	var got []uint64
	for line := range strings.Lines(r.out) {
		var ev teamEvent
		require.NoError(t, json.Unmarshal([]byte(line), &ev))
		require.Equal(t, typ, ev.Type)
		got = append(got, ev.Metadata.Seq)
	}
	require.Equal(t, want, got)
}

// TestEventsFollowExitCodes: a tail ends with exit 0 only when interrupted. A subscription crewd refuses is a finding
// (1), as any refusal of a view is; one lost once it ran is crewd no longer reached (3). Either way what came before
// was printed.
func TestEventsFollowExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		refuse    *wire.Error
		lost      error
		code      int
		says      string
		printsAll bool
	}{
		{"interrupted", nil, nil, exitOK, "", true},
		{"refused", wire.NewError(wire.CodeForbidden, "not yours"), nil, exitProblem,
			"crewctl: events.subscribe: wire: forbidden: not yours", false},
		{"lost", nil, errors.New("connection reset"), exitOpen, "crewctl: events.subscribe: connection reset", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.paged = 5
			if tc.refuse != nil {
				f.fail = map[string]*wire.Error{"events.subscribe": tc.refuse}
			}
			f.streamErr = tc.lost
			r := tail(t, f, "--run", audittest.RunBudget, "--json")
			require.Equal(t, tc.code, r.code, r.out+r.err)
			require.Contains(t, r.err, tc.says)
			want := f.paged
			if tc.printsAll {
				want = len(f.events[audittest.RunBudget])
			}
			require.Equal(t, want, strings.Count(r.out, "\n"), r.out)
		})
	}
}
