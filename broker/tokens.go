package broker

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

// tokenDomain separates broker tokens from any other use of the server key.
const tokenDomain = "crewlog-token\x00"

// mintToken derives the secret of credential (runID, key):
//
//	base64url(HMAC-SHA256(ServerKey, "crewlog-token\x00" + runID + "\x00" + key + "\x00" + nonce))
//
// nonce is tokenNonce(principal, commandId), so that an idempotent retry of run.create or credential.issue — which
// the engine answers with the recorded outcome — hands back the same secret whose digest that outcome recorded.
// Without a commandId the nonce is 16 random bytes and every call mints a fresh secret. NB: a derivation, not
// storage: the broker keeps no secret, the log keeps only sha256hex(token), and a restarted daemon with the same key
// still accepts the token because the digest persists.
func mintToken(serverKey []byte, runID, key, commandID string) (string, error) {
	nonce := commandID
	if nonce == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		nonce = string(b[:])
	}
	m := hmac.New(sha256.New, serverKey)
	m.Write([]byte(tokenDomain))
	m.Write([]byte(runID))
	m.Write([]byte{0})
	m.Write([]byte(key))
	m.Write([]byte{0})
	m.Write([]byte(nonce))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
}

// keyIDDomain is the message ServerKeyID keys. No token's message starts so (theirs start with tokenDomain), so an
// id is no token's secret and derives none.
const keyIDDomain = "crewlog-server-key-id\x00"

// ServerKeyID names a server key without revealing it: the lowercase hex
// HMAC-SHA256(key, "crewlog-server-key-id\x00"). admin.checkpoint answers the daemon's, so that a backup tool can
// tell whether the key file it copies beside the store is the one the running daemon mints with: a copy of another
// key would leave every token the daemon minted invalid after a restore.
func ServerKeyID(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(keyIDDomain))
	return hex.EncodeToString(m.Sum(nil))
}

// digestOf is the lowercase hex sha-256 of a secret: the only form in which a token reaches the engine and the log.
func digestOf(token string) string { return commands.SecretDigest(token) }

// sameDigest compares two digests in constant time (length mismatch is false), so a prober cannot learn a
// stored digest byte by byte from response timing.
func sameDigest(a, b string) bool { return commands.SameDigest(a, b) }

// jobNoncePrefix keys a job's nonce among a run's secrets; jobNonceKey is the key of job jobID's.
const jobNoncePrefix = "job:"

func jobNonceKey(jobID string) string { return jobNoncePrefix + jobID }

// tokenNonce is the nonce of a credential minted for principal's commandId. Ids are per principal (SPEC §2), so the
// nonce names the principal too: the admin and a run's orchestrator, who may both issue that run's credentials,
// never derive the same secret from the same id, and a re-issue always rotates the secret. NB: the admin's nonce is
// the bare id, as before format 3, so a run.create retried across the upgrade still derives the secret its
// recorded digest holds; only the admin could pick an id that spells another principal's nonce, and the admin may
// issue every credential anyway.
func tokenNonce(p events.Principal, commandID string) string {
	if commandID == "" || p.Role == events.RoleAdmin {
		return commandID
	}
	return p.Key() + "\x00" + commandID
}
