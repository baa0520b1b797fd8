package httpapi

import (
	"net/http"
	"sync"

	"github.com/crewlog/crewlog/audit"
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
	// Who issued and revoked is in the events, not the projection: read them first (outside the engine's read),
	// up to the head the projection will show at least. Only a valid id of a known run gets a cache entry: any
	// other id would evict every run's entry; runList answers it with its error.
	who := &runIssuers{}
	if runID, e := s.runParam(r); e == nil {
		var known bool
		s.opts.Engine.Read(func(st *projections.State) { _, known = st.Run(runID) })
		if known {
			var err error
			if who, err = s.issuers.of(s, runID, s.opts.Engine.Head()); err != nil {
				writeError(w, s.internal(r, err))
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

// issuerCache remembers, per run, who issued and revoked each credential key, read from the run's credential
// events incrementally (each call reads only the events since the last). It keeps at most maxIssuerRuns runs and
// forgets them all when full: rebuilding one is a scan of its stream.
type issuerCache struct {
	mu   sync.Mutex
	runs map[string]*runIssuers
}

const maxIssuerRuns = 256

type runIssuers struct {
	mu   sync.Mutex
	next uint64 // the next stream version to read
	keys map[string]keyActors
}

type keyActors struct{ issuedBy, revokedBy, revokedReason string }

func (c *issuerCache) init() { c.runs = make(map[string]*runIssuers) }

func (ri *runIssuers) lookup(key string) (keyActors, bool) {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	a, ok := ri.keys[key]
	return a, ok
}

// of brings run runID's entry up to position upTo and returns it.
func (c *issuerCache) of(s *Server, runID string, upTo uint64) (*runIssuers, error) {
	c.mu.Lock()
	ri := c.runs[runID]
	if ri == nil {
		if len(c.runs) >= maxIssuerRuns {
			clear(c.runs)
		}
		ri = &runIssuers{next: 1, keys: make(map[string]keyActors)}
		c.runs[runID] = ri
	}
	c.mu.Unlock()
	ri.mu.Lock()
	defer ri.mu.Unlock()
	it := s.opts.Log.ReadStream(runID, ri.next)
	defer it.Close()
	for it.Next() {
		rec := it.Event()
		if rec.Position > upTo {
			break
		}
		ri.next = rec.StreamVersion + 1
		if rec.Type != events.TypeCredentialIssued && rec.Type != events.TypeCredentialRevoked {
			continue
		}
		ev, err := projections.FromLog(rec)
		if err != nil {
			return nil, err
		}
		by := audit.ActorString(ev.Actor)
		switch p := ev.Payload.(type) {
		case *events.CredentialIssued:
			ri.keys[p.TaskID] = keyActors{issuedBy: by}
		case *events.CredentialRevoked:
			a := ri.keys[p.TaskID]
			a.revokedBy, a.revokedReason = by, p.Reason
			ri.keys[p.TaskID] = a
		}
	}
	return ri, it.Close()
}
