package events

// Credential event types (D§7.8).
const (
	TypeCredentialIssued  = "credential.issued"
	TypeCredentialRevoked = "credential.revoked"
)

// OrchestratorKey is the credential key of a run's orchestrator; any other
// key is a task id (a workflow task or a shadow's subId).
const OrchestratorKey = "orchestrator"

// CredentialIssued records a credential by its digest only: Digest is the
// lowercase hex sha-256 of the secret, which itself never reaches the log.
// Issuing again for a key replaces its digest, so an older secret for the
// same key stops working.
type CredentialIssued struct {
	TaskID string `json:"taskId" msgpack:"taskId"`
	Role   string `json:"role" msgpack:"role"`
	Digest string `json:"digest" msgpack:"digest"`
}

// CredentialRevoked revokes the key's current credential; Digest names the
// secret that was revoked (audit), it is not a lookup key.
type CredentialRevoked struct {
	TaskID string `json:"taskId" msgpack:"taskId"`
	Digest string `json:"digest,omitempty" msgpack:"digest,omitempty"`
	Reason string `json:"reason,omitempty" msgpack:"reason,omitempty"`
}
