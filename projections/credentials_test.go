package projections

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// A credential records who issued it and, once revoked, who revoked it and why: the actors of the events, named
// as events.Actor.String names them. The first revocation stands (as RevokedAt does), and a re-issue starts the
// credential afresh: it is valid again, and nothing of the revocation is left.
func TestCredentialActors(t *testing.T) {
	worker := events.Actor{Role: events.RoleWorker, TaskID: taskP}
	issue := func(h *history, by events.Actor, digest string) {
		h.addBy(by, runR, events.TypeCredentialIssued,
			&events.CredentialIssued{TaskID: taskP, Role: events.RoleWorker, Digest: digest})
	}
	revoke := func(h *history, by events.Actor, reason string) {
		h.addBy(by, runR, events.TypeCredentialRevoked,
			&events.CredentialRevoked{TaskID: taskP, Digest: "d1", Reason: reason})
	}
	base := Credential{RunID: runR, Key: taskP, Role: events.RoleWorker, Digest: "d1"}
	revokedByAdmin := func(c Credential) Credential { // issued by the orchestrator at 5, revoked at 6
		c.IssuedBy, c.Revoked, c.RevokedAt, c.RevokedBy, c.RevokedReason = "orchestrator", true, at(6), "admin",
			"rotated"
		return c
	}
	tests := []struct {
		name  string
		build func(h *history)
		// base, issued at position 5 (after the fixture), changed as the case says
		want func(c Credential) Credential
	}{
		{"issued by the orchestrator", func(h *history) { issue(h, byOrchestrator, "d1") },
			func(c Credential) Credential { c.IssuedBy = "orchestrator"; return c }},
		{"issued by a worker: its role and task", func(h *history) { issue(h, worker, "d1") },
			func(c Credential) Credential { c.IssuedBy = "worker/" + taskP; return c }},
		{"an actor whose task is its role: the role", func(h *history) {
			issue(h, events.Actor{Role: events.RoleOrchestrator, TaskID: events.RoleOrchestrator}, "d1")
		}, func(c Credential) Credential { c.IssuedBy = "orchestrator"; return c }},
		{"no actor: a dash", func(h *history) { issue(h, events.Actor{}, "d1") },
			func(c Credential) Credential { c.IssuedBy = "-"; return c }},
		{"revoked by the admin, with its reason", func(h *history) {
			issue(h, byOrchestrator, "d1")
			revoke(h, byAdmin, "rotated")
		}, revokedByAdmin},
		{"revoked without a reason", func(h *history) {
			issue(h, byOrchestrator, "d1")
			revoke(h, worker, "")
		}, func(c Credential) Credential {
			c.IssuedBy, c.Revoked, c.RevokedAt, c.RevokedBy = "orchestrator", true, at(6), "worker/"+taskP
			return c
		}},
		{"a second revocation changes nothing", func(h *history) {
			issue(h, byOrchestrator, "d1")
			revoke(h, byAdmin, "rotated")
			revoke(h, events.Actor{Role: events.RoleEngine}, "expired")
		}, revokedByAdmin},
		{"a re-issue clears the revocation", func(h *history) {
			issue(h, byOrchestrator, "d1")
			revoke(h, byAdmin, "rotated")
			issue(h, worker, "d2")
		}, func(c Credential) Credential {
			c.Digest, c.IssuedAt, c.IssuedBy = "d2", at(7), "worker/"+taskP
			return c
		}},
		{"a re-issue by another actor names it", func(h *history) {
			issue(h, byOrchestrator, "d1")
			issue(h, byAdmin, "d2")
		}, func(c Credential) Credential {
			c.Digest, c.IssuedAt, c.IssuedBy = "d2", at(6), "admin"
			return c
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h history
			fixture(&h, 0, false)
			tc.build(&h)
			s := fold(h.evs)
			got, ok := s.Credential(runR, taskP)
			require.True(t, ok)
			c := base
			c.IssuedAt = at(5)
			require.Equal(t, tc.want(c), got)
			require.Equal(t, []Credential{got}, s.Credentials(runR))
			checkInvariants(t, s)
		})
	}

	t.Run("a revocation of a key never issued adds nothing", func(t *testing.T) {
		var h history
		fixture(&h, 0, false)
		revoke(&h, byAdmin, "rotated")
		s := fold(h.evs)
		_, ok := s.Credential(runR, taskP)
		require.False(t, ok)
		require.Empty(t, s.Credentials(runR))
	})
}

// A credential keeps its actors' names in memory of its own: an event folded from the log names its actor with
// strings over the log's record, which the reader reuses (and a kept one would keep the record alive).
func TestCredentialActorsOwnTheirBytes(t *testing.T) {
	for _, actor := range []events.Actor{byAdmin, {Role: events.RoleWorker, TaskID: taskP}} {
		t.Run(actor.String(), func(t *testing.T) {
			var h history
			fixture(&h, 0, false)
			record := []byte(actor.Role + actor.TaskID) // the record the reader hands out, and reuses
			aliased := events.Actor{Role: unsafe.String(&record[0], len(actor.Role))}
			if actor.TaskID != "" {
				aliased.TaskID = unsafe.String(&record[len(actor.Role)], len(actor.TaskID))
			}
			h.addBy(aliased, runR, events.TypeCredentialIssued,
				&events.CredentialIssued{TaskID: taskP, Role: events.RoleWorker, Digest: "d1"})
			h.addBy(aliased, runR, events.TypeCredentialRevoked,
				&events.CredentialRevoked{TaskID: taskP, Digest: "d1"})
			s := fold(h.evs)
			for i := range record {
				record[i] = 'x'
			}
			c, ok := s.Credential(runR, taskP)
			require.True(t, ok)
			require.Equal(t, actor.String(), c.IssuedBy)
			require.Equal(t, actor.String(), c.RevokedBy)
		})
	}
}
