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
	out := make([]byte, 0, te.encodedSize())
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

// teamEventKeys is every byte of a teamEvent's JSON but its values', each optional key included.
const teamEventKeys = `{"time":"","type":"","runId":"","taskId":"","message":"","data":,"metadata":{"seq":,` +
	`"provenance":"","position":,"schemaVersion":,"commandId":"","causationId":"","correlationId":"",` +
	`"actor":{"role":"","taskId":""},"omitted":true}}`

// encodedSize is room for te's JSON, so that encodeJSON makes its buffer once: the keys, the strings and the data as
// they are, the numbers at their widest, and room for escapes, a quarter of the message's length more (a delegate
// event's message is JSON, each of its quotes escaped). NB: the ids count, where a fixed 256 bytes did not hold the
// keys and ids of an event of a run id and a command id of a UUID each.
func (te *teamEvent) encodedSize() int {
	m := &te.Metadata
	n := len(teamEventKeys) + len("18446744073709551615")*2 + len("65535") + len("null")
	n += len(te.Time) + len(te.Type) + len(te.RunID) + len(te.TaskID) + len(te.Message) + len(te.Data)
	n += len(m.Provenance) + len(m.CommandID) + len(m.CausationID) + len(m.CorrelationID)
	n += len(m.Actor.Role) + len(m.Actor.TaskID)
	return n + len(te.Message)/4 + 16
}
