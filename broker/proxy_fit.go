package broker

import (
	"encoding/json"
	"math"
	"unicode/utf8"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// widestProxyAnswerRest bounds the bytes proxy.result's answer takes besides its job id, request id and result: its
// keys, the state, the widest generation (the call's is not read here) and isError.
const widestProxyAnswerRest = 256

// resultFits refuses a proxy.complete whose result the worker's proxy.result could not answer in a frame
// (oversize-frame "proxy.complete: result too large", nothing recorded). A result is recorded canonical and answered
// as a JSON string, where a char can take more bytes than the request that sent it gave it ('<' is recorded in six
// bytes and escaped again as it is read, a quote escaped twice): delivered, such a result would be the call's for
// good (a second completion is refused) and the worker would never read it. Refused, the call stays executing, and
// the manager may deliver a shorter result, or an error.
//
// NB: a result the engine refuses anyway (not an object, not JSON-safe) is left to it, so that its answer is the
// engine's; and a result the engine would record fenced, never delivered, is measured all the same: it is not known
// here whether the call is still current.
func (c *conn) resultFits(x *commands.ProxyComplete) error {
	room := wire.ResultRoom(widestReaderID, c.s.opts.MaxFrame)
	if 7*len(x.Result)+6*(len(x.JobID)+len(x.RequestID))+widestProxyAnswerRest <= room {
		// NB: the common case, without shaping the result: a byte sent is at most six recorded ('<' as \u003c) and
		// seven answered (the backslash escaped again); JSON writes no byte of an id in more than six.
		return nil
	}
	result, isError, err := commands.ShapeProxyResult(x.Result)
	if err != nil {
		return nil
	}
	b, err := json.Marshal(proxyResult{JobID: x.JobID, RequestID: x.RequestID, State: projections.ProxyCompleted,
		Generation: math.MaxInt64, Result: result, IsError: isError})
	if err == nil && len(b) > room {
		return wire.NewError(wire.CodeOversizeFrame, x.Kind()+": result too large")
	}
	return nil
}

// widestProxyEventRest bounds the bytes a proxy.requested event takes as the manager reads it besides its run id,
// job id, request id, tool, command id, worker's task id and arguments: its keys, time, type, generation, flags,
// seq, position, provenance, schema version and role.
const widestProxyEventRest = 512

// argsFit refuses a worker's proxy.request whose proxy.requested event the manager could not read whole in a frame
// (oversize-frame "proxy.request: arguments too large", nothing recorded, the id not seen): in an events.since page
// answering a request id of up to readerIDLen bytes, or in a team.event push. The event is the only place the
// manager reads a call's arguments, recorded canonical and written as a JSON string ('<' sent in one byte is
// recorded in six and written in seven); an event that does not fit is sent with its data left out, and such a call
// would be admitted with arguments no one reads, holding its place in flight until its lease ended.
//
// NB: arguments the engine refuses anyway (not JSON-safe), and a request it could not admit (admittable), are left to
// it, so that its answer is the engine's.
func (c *conn) argsFit(x *commands.ProxyRequest, commandID string) error {
	room := proxyRequestedRoom(c.s.opts.MaxFrame)
	ids := len(x.RunID) + len(x.JobID) + len(x.RequestID) + len(x.Tool) + len(commandID) + len(x.TaskID)
	if 7*len(x.Args)+6*ids+widestProxyEventRest <= room || !admittable(x) {
		// NB: the common case, without rendering the event: as for a result (resultFits).
		return nil
	}
	args, err := commands.JSONSafeArgs(x.Args)
	if err != nil {
		return nil
	}
	if b, err := widestProxyRequested(x, commandID, args); err == nil && len(b)+1 > room {
		return wire.NewError(wire.CodeOversizeFrame, x.Kind()+": arguments too large")
	}
	return nil
}

// proxyRequestedRoom is the bytes a proxy.requested event may take, its comma counted, for the manager to read it
// whole in a frame of maxFrame: in an events.since page answering a request id of readerIDLen bytes, and in a
// team.event push.
func proxyRequestedRoom(maxFrame int) int {
	return min(frameBudget(maxFrame, widestReaderID), maxFrame-pushEnvelope)
}

// widestProxyRequested is the proxy.requested event x would be recorded with, its arguments args (canonical), as the
// manager reads it: its generation, sizes, seq, position and time at their widest.
func widestProxyRequested(x *commands.ProxyRequest, commandID, args string) ([]byte, error) {
	data, err := json.Marshal(&events.ProxyRequested{JobID: x.JobID, RequestID: x.RequestID, Generation: math.MaxInt64,
		Tool: x.Tool, Mutating: true, Args: args, ArgsBytes: math.MaxInt64})
	if err != nil {
		return nil, err
	}
	te := teamEvent{Time: "9999-12-31T23:59:59.999Z", Type: events.TypeProxyRequested, RunID: x.RunID, Data: data,
		Metadata: teamMetadata{Seq: math.MaxUint64, Provenance: "api", Position: math.MaxUint64,
			SchemaVersion: math.MaxUint16, CommandID: commandID,
			Actor: events.Actor{Role: events.RoleWorker, TaskID: x.TaskID}}}
	return te.encodeJSON()
}

// admittable reports whether x could be admitted at all, and so recorded with its arguments (proxy.requested): its
// tool one a grant can hold, its job one a run can hold, its request id one T8 lets through. Any other request is
// refused by the rules (not-granted, bad-request-id: recorded without the arguments, a tool name cut) or as an unknown
// job, and measuring its event would answer oversize-frame "arguments too large" for a name or an id the event never
// holds whole, whatever the arguments.
func admittable(x *commands.ProxyRequest) bool {
	return len(x.JobID) <= commands.MaxJobIDChars && x.RequestIDChars >= 1 &&
		x.RequestIDChars <= commands.MaxRequestIDChars && utf8.RuneCountInString(x.Tool) <= commands.MaxToolNameChars
}
