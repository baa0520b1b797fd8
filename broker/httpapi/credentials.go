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
func (s *Server) handleCredentials(w http.ResponseWriter, r *http.Request, _ principal) {
	s.runList(w, r, "credentials", nil,
		func(st *projections.State, runID string, req pageReq) (listPage, error) {
			pg, err := st.CredentialsPage(runID, projections.PageFilter{Limit: req.limit, Cursor: req.cursor})
			if err != nil {
				return listPage{}, cursorErr(err, req.cursor)
			}
			keys := make([]string, len(pg.Items))
			for i, c := range pg.Items {
				keys[i] = c.Key
			}
			// NB: a cold run's summary is read again for the statuses, once for the page: a read that fails is no task
			// gone.
			statuses, err := st.LookupTaskStatuses(runID, keys)
			if err != nil {
				return listPage{}, err
			}
			items := make([]credentialItem, len(pg.Items))
			for i, c := range pg.Items {
				it := credentialItem{RunID: c.RunID, Key: c.Key, Role: c.Role, IssuedAt: c.IssuedAt, IssuedBy: c.IssuedBy,
					Revoked: c.Revoked, RevokedAt: c.RevokedAt, RevokedBy: c.RevokedBy, RevokedReason: c.RevokedReason}
				if c.Key != events.OrchestratorKey && i < len(statuses) {
					it.TaskStatus = string(statuses[i])
				}
				items[i] = it
			}
			return listPage{items: items, next: pg.NextCursor, total: pg.Total}, nil
		})
}
