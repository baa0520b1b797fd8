package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/projections"
)

// explainReach is how far past the asked position a rebuild for explain folds, so the decision holding that
// position is complete: a decision's events are one command's, a handful.
const explainReach = 64

type explainResult struct {
	Event    json.RawMessage `json:"event"`
	Meaning  string          `json:"meaning"`
	Decision *audit.Decision `json:"decision"`
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
	// The decision may have started a few events before pos. Fold (cheaply, and kept for the next question) up to
	// well before it, then re-run only the decisions from there to a little after it: explaining is the costly
	// part, so it covers at most 2 × explainReach + 1 events.
	var baseAt uint64 // 0: from position 1
	if pos > explainReach+1 {
		baseAt = pos - 1 - explainReach
	}
	res, err := s.explainFrom(r.Context(), pr, baseAt, min(pos+explainReach, head), rec.Stream)
	if err != nil {
		s.rebuildFailed(w, r, err)
		return
	}
	for i := range res.Decisions {
		if d := &res.Decisions[i]; d.Position <= pos && pos <= d.Last {
			out.Decision = d
			break
		}
	}
	writeJSON(w, out)
}
