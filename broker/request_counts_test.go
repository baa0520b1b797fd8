package broker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestStatsCountEveryAnswer: the census counts every request answered, by method and answer, those refused before
// a command reaches the engine among them (a worker's forbidden, malformed or unknown requests: the engine's counts
// see none of them, so an operator could not see a hostile worker's flood); a method the server does not answer is
// "other", so a client cannot grow the labels.
func TestStatsCountEveryAnswer(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	before := requestCountsOf(f.srv)
	w := f.dial()
	w.hello(runR, taskP, s.p)
	w.ok("ping", nil)
	w.ok("ping", nil)
	w.fails("run.create", map[string]any{"runId": "X", "team": "t", "goal": "g", "cwd": "/w"}, wire.CodeForbidden)
	w.fails("msg.send", map[string]any{"to": 7}, wire.CodeBadParams)
	w.fails("no.such.method", nil, wire.CodeNotImplemented)
	w.fails("another.unknown", nil, wire.CodeNotImplemented)
	w.fails(wire.MethodHello, map[string]any{"runId": runR, "taskId": taskP, "token": s.p}, wire.CodeProtocol)

	got := requestCountsOf(f.srv)
	for k, n := range before {
		got[k] -= n
		if got[k] == 0 {
			delete(got, k)
		}
	}
	require.Equal(t, map[[2]string]uint64{
		{wire.MethodHello, "ok"}:                       1,
		{"ping", "ok"}:                                 2,
		{"run.create", string(wire.CodeForbidden)}:     1,
		{"msg.send", string(wire.CodeBadParams)}:       1,
		{otherMethod, string(wire.CodeNotImplemented)}: 2,
		{wire.MethodHello, string(wire.CodeProtocol)}:  1,
	}, got)
}

func requestCountsOf(s *Server) map[[2]string]uint64 {
	out := map[[2]string]uint64{}
	for _, r := range s.Stats().Requests {
		out[[2]string{r.Method, r.Answer}] = r.N
	}
	return out
}

// TestRequestCountsKeepTheirLabelsBounded: an answer is counted under its method and its code, a method the server
// does not answer under "other", and a code outside wire's registry under internal, never as "ok": a made-up method
// or code adds no label, and no error is counted as a success.
func TestRequestCountsKeepTheirLabelsBounded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		answer *wire.Error
		want   RequestCount
	}{
		{"a result", "ping", nil, RequestCount{"ping", "ok", 1}},
		{"a registered code", "ping", wire.NewError(wire.CodeBusy, ""), RequestCount{"ping", string(wire.CodeBusy), 1}},
		{"a method not served", "made.up", nil, RequestCount{otherMethod, "ok", 1}},
		{"a code not registered", "ping", wire.NewError("made-up", "m"),
			RequestCount{"ping", string(wire.CodeInternal), 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRequestCounts()
			r.add(tc.method, tc.answer)
			require.Equal(t, []RequestCount{tc.want}, r.counts())
		})
	}
}
