package broker

import (
	"sync/atomic"

	"github.com/crewlog/crewlog/broker/wire"
)

// requestCounts counts the requests the server answered, by method and answer ("ok" or the error's code), for
// metrics: every answer, those refused before a command reaches the engine (bad params, forbidden, over a limit,
// oversize) among them, which the engine's own counts never see. Label values are bounded: a method the server does
// not answer counts as "other", and codes are wire's registry.
type requestCounts struct {
	methods map[string]int
	names   []string // by index; "other" last
	codes   map[wire.Code]int
	answers []string // by index; "ok" first
	n       []atomic.Uint64
}

// otherMethod is the method label of a request for a method the server does not answer.
const otherMethod = "other"

func newRequestCounts() *requestCounts {
	r := &requestCounts{methods: map[string]int{}, codes: map[wire.Code]int{}, answers: []string{"ok"}}
	for _, m := range Methods() {
		r.methods[m] = len(r.names)
		r.names = append(r.names, m)
	}
	r.names = append(r.names, otherMethod)
	for _, c := range wire.Codes() {
		r.codes[c] = len(r.answers)
		r.answers = append(r.answers, string(c))
	}
	r.n = make([]atomic.Uint64, len(r.names)*len(r.answers))
	return r
}

// add counts one answer to a request for method: we nil for a result.
func (r *requestCounts) add(method string, we *wire.Error) {
	m, ok := r.methods[method]
	if !ok {
		m = len(r.names) - 1
	}
	a := 0
	if we != nil {
		if a, ok = r.codes[we.Code]; !ok {
			a = r.codes[wire.CodeInternal]
		}
	}
	r.n[m*len(r.answers)+a].Add(1)
}

// RequestCount is how many requests for Method were answered Answer ("ok" or an error code).
type RequestCount struct {
	Method string
	Answer string
	N      uint64
}

// counts returns the counts that are not zero, by method then answer in their fixed orders.
func (r *requestCounts) counts() []RequestCount {
	var out []RequestCount
	for i := range r.n {
		if n := r.n[i].Load(); n > 0 {
			out = append(out, RequestCount{Method: r.names[i/len(r.answers)], Answer: r.answers[i%len(r.answers)], N: n})
		}
	}
	return out
}
