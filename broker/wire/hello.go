package wire

import (
	"encoding/json"
	"strconv"
	"time"
)

// ProtocolVersion is the only protocol version: pi-crew decided against a v2 and evolves by adding methods.
const ProtocolVersion = 1

// HelloTimeout is how long the broker waits for the hello after accepting a connection before closing it.
const HelloTimeout = time.Second

// maxCredentialLen bounds runId, taskId and token in a hello, in UTF-16 code units.
const maxCredentialLen = 256

// Hello is the params of the hello request, the first request on every connection:
// {"protocol": 1, "runId": …, "taskId": …, "token": …}. pi-crew also accepts and ignores "role"; the role comes
// from the token, never from the client, so Hello has no such field.
//
// NB: Token is a secret. String redacts it, but encoding a Hello (e.g. with a JSON log handler) does not.
//
// A Hello is a plain value; DecodeHello returns one that does not alias its input.
type Hello struct {
	Protocol int    `json:"protocol"`
	RunID    string `json:"runId"`
	TaskID   string `json:"taskId"`
	Token    string `json:"token"`
}

// String describes h without its token.
func (h Hello) String() string {
	return "hello{protocol:" + strconv.Itoa(h.Protocol) + " runId:" + h.RunID + " taskId:" + h.TaskID + " token:***}"
}

// HelloAck is the result of a successful hello: {"protocol": 1, "session": …, "run": …, "ok": true}. It never
// echoes the token. A HelloAck is a plain value.
type HelloAck struct {
	Protocol int    `json:"protocol"`
	Session  string `json:"session"` // who serves the connection; pi-crew clients only display it
	Run      string `json:"run"`     // the run the connection is now bound to
	OK       bool   `json:"ok"`
}

// helloKeys are the members of hello params DecodeHello reads: the protocol, then the credential's three strings.
var helloKeys = [...]string{"protocol", "runId", "taskId", "token"}

// DecodeHello validates hello params as pi-crew does: an object with protocol the number 1, and runId, taskId and
// token strings of 1..256 UTF-16 code units; other keys are ignored. Any failure is the same *Error, code auth,
// message "hello rejected", so a prober learns nothing about which field was wrong; the broker then closes.
func DecodeHello(params json.RawMessage) (Hello, error) {
	rejected := NewError(CodeAuth, MsgHelloRejected)
	// NB: the members read found where they are (lastMembers), not the params decoded into a map of every key: a
	// frame's worth of keys a peer made up cost megabytes per hello, before it was authenticated.
	var fields [len(helloKeys)][]byte
	if !validJSON(params) || !lastMembers(params, helloKeys[:], fields[:]) {
		return Hello{}, rejected
	}
	// JSON.parse makes 1, 1.0 and 1e0 the same number, so compare the value, not the text.
	var protocol float64
	if json.Unmarshal(fields[0], &protocol) != nil || protocol != ProtocolVersion {
		return Hello{}, rejected
	}
	h := Hello{Protocol: ProtocolVersion}
	for i, dst := range []*string{&h.RunID, &h.TaskID, &h.Token} {
		s, ok := jsonString(fields[1+i])
		if !ok || s == "" || UTF16Len(s) > maxCredentialLen {
			return Hello{}, rejected
		}
		*dst = s
	}
	return h, nil
}
