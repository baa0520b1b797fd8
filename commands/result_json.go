package commands

import (
	"encoding/json"
	"math"
	"strconv"
)

// resultAppender is a result type that appends its own JSON: exactly the
// bytes encoding/json.Marshal writes for it (TestResultJSONMatchesEncodingJSON
// and FuzzResultJSONMatchesEncodingJSON compare them), without reflection.
// The writer encodes the result of every command it decides.
type resultAppender interface {
	appendJSON(b []byte) ([]byte, error)
}

// encodeResult is json.Marshal(result), skipping reflection for the results
// that append themselves.
func encodeResult(result any) ([]byte, error) {
	if r, ok := result.(resultAppender); ok {
		// Room for a settlement's answer (about 170 bytes with a UUID
		// subId) without growing.
		return r.appendJSON(make([]byte, 0, 256))
	}
	return json.Marshal(result)
}

// AppendJSONString appends s as encoding/json.Marshal encodes a string (the
// broker encodes a TeamEvent's strings with it too). NB: only printable
// ASCII with nothing to escape is written here; anything else (quotes,
// backslashes, control characters, HTML's <, > and &, which Marshal
// escapes, non-ASCII) is left to encoding/json itself.
func AppendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSONFloat appends f as encoding/json.Marshal encodes a float64:
// shortest 'f' formatting within [1e-6, 1e21), the rest (exponents) left
// to encoding/json. NaN and ±Inf fail as Marshal fails.
func appendJSONFloat(b []byte, f float64) ([]byte, error) {
	if a := math.Abs(f); a == 0 || (a >= 1e-6 && a < 1e21) {
		return strconv.AppendFloat(b, f, 'f', -1, 64), nil
	}
	q, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return append(b, q...), nil
}

func (r DelegateResult) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"ok":`...)
	b = strconv.AppendBool(b, r.OK)
	b = append(b, `,"grandchildTaskRef":`...)
	b = AppendJSONString(b, r.GrandchildTaskRef)
	b = append(b, `,"childDepth":`...)
	b = strconv.AppendInt(b, int64(r.ChildDepth), 10)
	b = append(b, `,"timeoutSec":`...)
	b, err := appendJSONFloat(b, r.TimeoutSec)
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

func (r SettleResult) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"ok":`...)
	b = strconv.AppendBool(b, r.OK)
	b = append(b, `,"subId":`...)
	b = AppendJSONString(b, r.SubID)
	b = append(b, `,"status":`...)
	b = AppendJSONString(b, r.Status)
	b = append(b, `,"messageId":`...)
	b = AppendJSONString(b, r.MessageID)
	b = append(b, `,"to":`...)
	b = AppendJSONString(b, r.To)
	b = append(b, `,"rerouted":`...)
	b = strconv.AppendBool(b, r.Rerouted)
	b = append(b, `,"chargedTokens":`...)
	b = strconv.AppendInt(b, r.Charged, 10)
	return append(b, '}'), nil
}
