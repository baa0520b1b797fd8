package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/projections"
)

type explainResult struct {
	Event    json.RawMessage `json:"event"`
	Meaning  string          `json:"meaning"`
	Decision *audit.Decision `json:"decision"`
	// PoolInputs says where a delegation request's daemon-wide inputs (the slots held in all, the other runs
	// waiting for one) came from: "recorded", the decision's own record (policy.held, policy.waiting), since the
	// decision is re-run on its run's state alone. Absent for other decisions.
	PoolInputs string `json:"poolInputs,omitempty"`
}

// GET /api/v1/events/{position}/explain
func (s *Server) handleExplain(w http.ResponseWriter, r *http.Request, pr principal) {
	pos, err := strconv.ParseUint(r.PathValue("position"), 10, 64)
	if err != nil || pos == 0 {
		writeError(w, badParams("position must be a log position (an integer ≥ 1), got %q", r.PathValue("position")))
		return
	}
	if e := newParams(r.URL).strict(); e != nil {
		writeError(w, e)
		return
	}
	head := s.opts.Engine.Head()
	if pos > head {
		writeError(w, notFound("no event at position %d (the head is %d)", pos, head))
		return
	}
	rec, err := s.opts.Log.Event(pos)
	if err != nil {
		writeError(w, s.internal(r, err))
		return
	}
	ev, err := projections.FromLog(&rec)
	if err != nil {
		writeError(w, s.internal(r, err))
		return
	}
	data, err := eventJSON(&rec)
	if err != nil {
		writeError(w, s.internal(r, err))
		return
	}
	out := explainResult{Event: data, Meaning: audit.Describe(ev)}
	// The decision is re-run on its run's state just before it, folded from the run's stream alone: O(the run).
	d, recorded, ok, err := s.explainAt(r.Context(), pr, pos)
	if err != nil {
		s.rebuildFailed(w, r, err)
		return
	}
	if ok {
		out.Decision = &d
	}
	if recorded {
		out.PoolInputs = "recorded"
	}
	writeJSON(w, out)
}
