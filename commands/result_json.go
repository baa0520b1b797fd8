package commands

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/crewlog/crewlog/events/jsonstring"
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
	b = jsonstring.Append(b, r.GrandchildTaskRef)
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
	b = jsonstring.Append(b, r.SubID)
	b = append(b, `,"status":`...)
	b = jsonstring.Append(b, r.Status)
	b = append(b, `,"messageId":`...)
	b = jsonstring.Append(b, r.MessageID)
	b = append(b, `,"to":`...)
	b = jsonstring.Append(b, r.To)
	b = append(b, `,"rerouted":`...)
	b = strconv.AppendBool(b, r.Rerouted)
	b = append(b, `,"chargedTokens":`...)
	b = strconv.AppendInt(b, r.Charged, 10)
	return append(b, '}'), nil
}
