package broker

import (
	"encoding/json"
	"strconv"

	"github.com/crewlog/crewlog/broker/wire"
)

// encodeJSON returns json.Marshal(te), byte for byte, without its reflection and without compacting te.Data again:
// the encoding of a page of events.since and of every team.event push, where json.Marshal's struct encoder and its
// second pass over the payload's JSON were a fifth of a page's CPU. NB: te.Data must be json.Marshal's output (or
// null), as renderDecodedWith makes it; an imported event's data is the source's JSON, which json.Marshal compacts,
// so that event is encoded by json.Marshal.
func (te teamEvent) encodeJSON() ([]byte, error) {
	if te.Metadata.Imported != nil || (te.Data != nil && len(te.Data) == 0) {
		return json.Marshal(te) // (empty data: to fail as json.Marshal fails)
	}
	m := &te.Metadata
	out := make([]byte, 0, 256+len(te.Data)+len(te.Message))
	out = append(out, `{"time":`...)
	out = wire.AppendJSONString(out, te.Time)
	out = append(out, `,"type":`...)
	out = wire.AppendJSONString(out, te.Type)
	out = append(out, `,"runId":`...)
	out = wire.AppendJSONString(out, te.RunID)
	if te.TaskID != "" {
		out = append(out, `,"taskId":`...)
		out = wire.AppendJSONString(out, te.TaskID)
	}
	if te.Message != "" {
		out = append(out, `,"message":`...)
		out = wire.AppendJSONString(out, te.Message)
	}
	out = append(out, `,"data":`...)
	if te.Data == nil {
		out = append(out, "null"...)
	} else {
		out = append(out, te.Data...)
	}
	out = append(out, `,"metadata":{"seq":`...)
	out = strconv.AppendUint(out, m.Seq, 10)
	out = append(out, `,"provenance":`...)
	out = wire.AppendJSONString(out, m.Provenance)
	out = append(out, `,"position":`...)
	out = strconv.AppendUint(out, m.Position, 10)
	out = append(out, `,"schemaVersion":`...)
	out = strconv.AppendUint(out, uint64(m.SchemaVersion), 10)
	for _, f := range []struct{ key, value string }{
		{`,"commandId":`, m.CommandID}, {`,"causationId":`, m.CausationID}, {`,"correlationId":`, m.CorrelationID},
	} {
		if f.value != "" {
			out = append(out, f.key...)
			out = wire.AppendJSONString(out, f.value)
		}
	}
	out = append(out, `,"actor":{"role":`...)
	out = wire.AppendJSONString(out, m.Actor.Role)
	if m.Actor.TaskID != "" {
		out = append(out, `,"taskId":`...)
		out = wire.AppendJSONString(out, m.Actor.TaskID)
	}
	out = append(out, '}')
	if m.Omitted {
		out = append(out, `,"omitted":true`...)
	}
	return append(out, '}', '}'), nil
}
