package httpapi

import (
	"net/http"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// credentialItem is a credential on the API: when and by whom it was issued and revoked, never its digest.
type credentialItem struct {
	RunID         string `json:"runId"`
	Key           string `json:"key"`
	Role          string `json:"role"`
	IssuedAt      int64  `json:"issuedAt"`
	IssuedBy      string `json:"issuedBy,omitempty"`
	Revoked       bool   `json:"revoked"`
	RevokedAt     int64  `json:"revokedAt,omitempty"`
	RevokedBy     string `json:"revokedBy,omitempty"`
	RevokedReason string `json:"revokedReason,omitempty"`
	TaskStatus    string `json:"taskStatus,omitempty"`
}

// GET /api/v1/runs/{runId}/credentials?limit=&cursor=
func (s *Server) handleCredentials(w http.ResponseWriter, r *http.Request, p principal) {
	// Who issued and revoked is in the events, not the projection: read them first (outside the engine's read),
	// up to the head the projection will show at least, as p's scan (issuers.go). Only a valid id of a known run
	// gets a cache entry: any other id would take a run's place; runList answers it with its error.
	who := &runIssuers{}
	if runID, e := s.runParam(r); e == nil {
		var known bool
		s.opts.Engine.Read(func(st *projections.State) { _, known = st.Run(runID) })
		if known {
			var err error
			if who, err = s.issuersOf(r.Context(), p, runID, s.opts.Engine.Head()); err != nil {
				s.rebuildFailed(w, r, err)
				return
			}
		}
	}
	s.runList(w, r, "credentials", nil,
		func(st *projections.State, runID string, req pageReq) (listPage, error) {
			pg, err := st.CredentialsPage(runID, projections.PageFilter{Limit: req.limit, Cursor: req.cursor})
			if err != nil {
				return listPage{}, cursorErr(err, req.cursor)
			}
			items := make([]credentialItem, len(pg.Items))
			for i, c := range pg.Items {
				it := credentialItem{RunID: c.RunID, Key: c.Key, Role: c.Role, IssuedAt: c.IssuedAt, Revoked: c.Revoked,
					RevokedAt: c.RevokedAt}
				if a, ok := who.lookup(c.Key); ok {
					it.IssuedBy = a.issuedBy
					if c.Revoked {
						it.RevokedBy, it.RevokedReason = a.revokedBy, a.revokedReason
					}
				}
				if c.Key != events.OrchestratorKey {
					if t, ok := st.Task(runID, c.Key); ok {
						it.TaskStatus = string(t.Status)
					}
				}
				items[i] = it
			}
			return listPage{items: items, next: pg.NextCursor, total: pg.Total}, nil
		})
}
