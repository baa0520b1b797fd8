package projections

import (
	"strings"

	"github.com/crewlog/crewlog/events"
)

// Credential is the read model of a run credential: a key (a task id, or
// events.OrchestratorKey) with the sha-256 digest of its current secret. The
// secret itself is never part of the state. Times are unix milliseconds.
//
// IssuedBy and RevokedBy name the actors of the current issue and of its
// revocation (events.Actor.String), RevokedReason the revocation's reason;
// a re-issue clears the revocation's three fields. The dashboard shows
// them with each page, so they are kept here rather than looked up in the
// run's events. No socket reply carries a Credential (docs/protocol.md);
// their json names are the dashboard's (docs/dashboard-api.md).
type Credential struct {
	RunID         string `json:"runId" msgpack:"runId"`
	Key           string `json:"key" msgpack:"key"`
	Role          string `json:"role" msgpack:"role"`
	Digest        string `json:"digest" msgpack:"digest"`
	Revoked       bool   `json:"revoked,omitempty" msgpack:"revoked"`
	IssuedAt      int64  `json:"issuedAt" msgpack:"issuedAt"`
	RevokedAt     int64  `json:"revokedAt,omitempty" msgpack:"revokedAt"`
	IssuedBy      string `json:"issuedBy,omitempty" msgpack:"issuedBy,omitempty"`
	RevokedBy     string `json:"revokedBy,omitempty" msgpack:"revokedBy,omitempty"`
	RevokedReason string `json:"revokedReason,omitempty" msgpack:"revokedReason,omitempty"`
}

// Valid reports whether a secret with this digest authenticates the key:
// a re-issue replaces the digest, so older secrets stop working too.
func (c Credential) Valid(digest string) bool { return !c.Revoked && c.Digest == digest }

func (r *runState) addCredential(c *Credential) {
	r.creds[c.Key] = c
	r.credOrder = append(r.credOrder, c.Key)
}

func applyCredential(r *runState, ev events.Event) {
	at := ev.UnixMilli()
	switch ev.Type {
	case events.TypeCredentialIssued:
		if p := events.PayloadAs[events.CredentialIssued](ev); p != nil {
			c := r.creds[p.TaskID]
			if c == nil {
				c = &Credential{RunID: r.run.RunID, Key: p.TaskID}
				r.addCredential(c)
			}
			c.Role, c.Digest, c.IssuedAt, c.IssuedBy = p.Role, p.Digest, at, actorName(ev.Actor)
			c.Revoked, c.RevokedAt, c.RevokedBy, c.RevokedReason = false, 0, "", ""
		}
	case events.TypeCredentialRevoked:
		if p := events.PayloadAs[events.CredentialRevoked](ev); p != nil {
			if c := r.creds[p.TaskID]; c != nil && !c.Revoked {
				c.Revoked, c.RevokedAt, c.RevokedBy, c.RevokedReason = true, at, actorName(ev.Actor), p.Reason
			}
		}
	}
}

// actorName is a's name (events.Actor.String) in memory of its own. NB: an
// event folded from the log may name its actor with strings over the log's
// record (eventlog's transient reads), and a role alone is its own name: a
// credential that kept it would keep the whole record alive.
func actorName(a events.Actor) string { return strings.Clone(a.String()) }

// Credential returns the credential of key in run runID. The orchestrator
// credential of a cold run comes from its summary (no read of the log), so a
// hello or a request of a run's orchestrator is checked without re-folding
// the run; any other key of a cold run re-folds it.
func (s *State) Credential(runID, key string) (Credential, bool) {
	c, ok, _ := s.LookupCredential(runID, key)
	return c, ok
}

// LookupCredential is Credential, with the error (ErrNotReadBack) met reading a cold run's summary or records back
// from the log: such a credential is not known to be absent (a caller that took it for revoked would end its
// holder's connections for good). A cold run's summary is read once.
func (s *State) LookupCredential(runID, key string) (Credential, bool, error) {
	r := s.runs[runID]
	if r == nil {
		cr, err := s.lookupCold(runID)
		if cr == nil {
			return Credential{}, false, err
		}
		if key == events.OrchestratorKey {
			if cr.orch == nil {
				return Credential{}, false, nil
			}
			return *cr.orch, true, nil
		}
		if r, err = s.loadCold(runID, cr); r == nil {
			return Credential{}, false, err
		}
	}
	if r.creds[key] == nil {
		return Credential{}, false, nil
	}
	return *r.creds[key], true, nil
}

// Credentials returns the credentials of run runID in the order their keys
// were first issued.
func (s *State) Credentials(runID string) []Credential {
	r := s.run(runID)
	if r == nil {
		return nil
	}
	out := make([]Credential, 0, len(r.credOrder))
	for _, k := range r.credOrder {
		out = append(out, *r.creds[k])
	}
	return out
}

// CredentialsPage returns a page of run runID's credentials in the order
// their keys were first issued. It copies only the page's credentials.
func (s *State) CredentialsPage(runID string, f PageFilter) (Page[Credential], error) {
	r, err := s.lookupRun(runID)
	if r == nil {
		return Page[Credential]{}, err
	}
	return filteredPage(len(r.credOrder), f, everything(len(r.credOrder)), func(i int) Credential {
		return *r.creds[r.credOrder[i]]
	})
}
