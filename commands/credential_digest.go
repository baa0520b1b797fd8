package commands

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
)

// validDigest reports whether d is a lowercase hex sha-256 digest.
func validDigest(d string) bool {
	if len(d) != 64 {
		return false
	}
	for i := 0; i < len(d); i++ {
		if c := d[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// SecretDigest is the lowercase hex sha-256 of a secret (a credential's
// token, a job's nonce): the only form in which a secret reaches the engine
// and the log.
func SecretDigest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// SameDigest compares two digests in constant time (length mismatch is
// false), so a prober cannot learn a stored digest byte by byte from
// response timing.
func SameDigest(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
