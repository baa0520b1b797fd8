package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stuckPages is a daemon whose events.since says there is more and moves on by nothing.
type stuckPages struct{ calls int }

func (s *stuckPages) Call(_ context.Context, method string, params, result any) error {
	s.calls++
	if s.calls > 1 {
		// NB: a page asked for again is the failure itself; answering it would spin until the package timed out.
		return errors.New("stuckPages: the same page asked for again")
	}
	b, _ := json.Marshal(params)
	var p struct {
		SinceSeq uint64 `json:"sinceSeq"`
	}
	_ = json.Unmarshal(b, &p)
	page, _ := json.Marshal(map[string]any{"events": []any{}, "nextSeq": p.SinceSeq, "hasMore": true})
	return json.Unmarshal(page, result)
}

func (s *stuckPages) Subscribe(context.Context, string, uint64, []string) (Stream, error) {
	return nil, nil
}
func (s *stuckPages) Close() error { return nil }

// TestEventsRefusesAPageThatMovesOnByNothing: a page that says there is more but whose nextSeq is where it began
// would be asked for again without end (the pages of the other views have the same guard, callPaged): events stops
// with a problem found.
func TestEventsRefusesAPageThatMovesOnByNothing(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, writeFile(tok, "t0ken"))
	s := &stuckPages{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out, errb strings.Builder
	code := run(ctx, []string{"events", "--run", "R", "--since", "7", "--token-file", tok}, stdio{out: &out, err: &errb},
		func(context.Context, string, string) (Broker, error) { return s, nil })
	require.Equal(t, exitProblem, code, errb.String())
	require.Contains(t, errb.String(), "moved on by nothing")
	require.Equal(t, 1, s.calls)
}
