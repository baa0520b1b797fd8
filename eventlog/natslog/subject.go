package natslog

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/crewlog/crewlog/eventlog"
)

// A crewlog stream's events go to subject crewlog.<Stream>.events.<token>,
// where token names the crewlog stream (a run id, "$engine", "$import", or
// any 1..255 bytes the log accepts) as one NATS subject token:
//
//   - a name of only A-Z a-z 0-9 '_' '-' (every run id) is its own token;
//   - any other name is '~' followed by its bytes in unpadded base64url
//     (RFC 4648 §5), whose alphabet is those same 64 characters: "$engine"
//     is "~JGVuZ2luZQ".
//
// The mapping is injective (a plain token never starts with '~'), so
// decoding is exact; a token never holds '.', '*', '>', whitespace or a
// leading '$', and is at most 1+340 bytes for a 255-byte name.
const encodedPrefix = '~'

// errNotToken is a subject token streamToken never makes.
var errNotToken = errors.New("natslog: not a crewlog stream's subject token")

// maxTokenLen is the longest token: a MaxStreamLen-byte name encoded.
var maxTokenLen = 1 + base64.RawURLEncoding.EncodedLen(eventlog.MaxStreamLen)

// plainToken reports whether s is its own token.
func plainToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// streamToken is the subject token of crewlog stream s (1..MaxStreamLen bytes).
func streamToken(s string) string {
	if plainToken(s) {
		return s
	}
	return string(encodedPrefix) + base64.RawURLEncoding.EncodeToString([]byte(s))
}

// tokenStream is the inverse of streamToken; an error for a token
// streamToken never makes.
func tokenStream(tok string) (string, error) {
	if len(tok) > maxTokenLen {
		return "", fmt.Errorf("%w: %d bytes exceeds %d", errNotToken, len(tok), maxTokenLen)
	}
	if plainToken(tok) {
		if len(tok) > eventlog.MaxStreamLen {
			// NB: maxTokenLen bounds an encoded name; a plain token is the name, which the log bounds tighter.
			return "", fmt.Errorf("%w: a name of %d bytes exceeds %d", errNotToken, len(tok), eventlog.MaxStreamLen)
		}
		return tok, nil
	}
	if tok == "" || tok[0] != encodedPrefix || !plainToken(tok[1:]) {
		// NB: the alphabet checked here, not left to the decoder, which skips '\r' and '\n' even when strict:
		// "~00\r0" read as the name of "~000".
		return "", fmt.Errorf("%w: %q", errNotToken, tok)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(tok[1:])
	if err != nil || len(b) == 0 || len(b) > eventlog.MaxStreamLen || plainToken(string(b)) {
		// NB: a plain name encoded would decode, but streamToken never
		// encodes one: accepting it would give one stream two subjects.
		return "", fmt.Errorf("%w: %q", errNotToken, tok)
	}
	return string(b), nil
}

// eventsPrefix is the subject prefix of every crewlog stream's events.
func (c Config) eventsPrefix() string { return "crewlog." + c.Stream + ".events." }

// EventSubject is the subject of crewlog stream s's events.
func (c Config) EventSubject(s string) string { return c.eventsPrefix() + streamToken(s) }

// eventsWildcard matches every EventSubject: the stream's second subject.
func (c Config) eventsWildcard() string { return c.eventsPrefix() + "*" }

// subjectStream is the crewlog stream an event subject of c names.
func (c Config) subjectStream(subject string) (string, error) {
	tok, ok := strings.CutPrefix(subject, c.eventsPrefix())
	if !ok {
		return "", fmt.Errorf("%w: %q is not an event subject of stream %s", errNotToken, subject, c.Stream)
	}
	return tokenStream(tok)
}
