package broker

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// teamEvent is an event as pi-crew's TeamEvent (D§3.1), the "data" of a team.event push and an element of
// events.since's "events":
//
//	{"time":"2026-11-30T12:00:00.000Z","type":"delegate.admitted","runId":"R","taskId":"P",
//	 "message":"delegate.admitted: {…}","data":{…payload…},
//	 "metadata":{"seq":7,"provenance":"api","position":42,"schemaVersion":1,"commandId":"…",
//	  "actor":{"role":"worker","taskId":"P"}}}
//
// seq is the event's version in the run's stream (gapless from 1), which is what sinceSeq and fromSeq count.
// taskId is lifted from the payload's taskId (for delegate events the parent task, as in pi-crew). message is
// pi-crew's "<type>: <JSON data>", the JSON cut to 200 UTF-16 units, on delegate events, the question on
// ask.requested. crewlog adds position (global log position), schemaVersion, commandId, causationId, correlationId
// and actor to metadata.
type teamEvent struct {
	Time     string          `json:"time"`
	Type     string          `json:"type"`
	RunID    string          `json:"runId"`
	TaskID   string          `json:"taskId,omitempty"`
	Message  string          `json:"message,omitempty"`
	Data     json.RawMessage `json:"data"`
	Metadata teamMetadata    `json:"metadata"`
}

type teamMetadata struct {
	Seq           uint64       `json:"seq"`
	Provenance    string       `json:"provenance"`
	Position      uint64       `json:"position"`
	SchemaVersion uint16       `json:"schemaVersion"`
	CommandID     string       `json:"commandId,omitempty"`
	CausationID   string       `json:"causationId,omitempty"`
	CorrelationID string       `json:"correlationId,omitempty"`
	Actor         events.Actor `json:"actor"`
	// Imported is set on an event an import kept as it was (foreign.imported): the event then shows the
	// source's own type, message and data, and this says where it came from.
	Imported *importedMeta `json:"imported,omitempty"`
	// Omitted is set when data was left out because the event would not fit in one frame; the seq is still
	// delivered so a client never sees a gap.
	Omitted bool `json:"omitted,omitempty"`
}

// importedMeta is teamMetadata.Imported: the stored type, the source and the event's seq in the source's log.
type importedMeta struct {
	Type   string `json:"type"`
	Source string `json:"source"`
	Seq    int64  `json:"seq"`
}

// isoMillis is JavaScript's Date.prototype.toISOString layout.
const isoMillis = "2006-01-02T15:04:05.000Z"

// renderEvent decodes a stored record into its TeamEvent as viewer sees it. NB: credential events lose their digest
// here, and job.created its nonce's (the nonce is a credential, docs/design-jobs.md): a digest is not a secret, but
// no client needs another key's digest, so it never leaves the daemon. And a
// worker sees the commandId of its own commands only (SPEC §2): ids are per principal, so another's id is no lever,
// but it is not the worker's to read either.
// A worker reads a message's body and a proxied call's arguments and result only where they are its task's
// (eventViewer).
func renderEvent(r *eventlog.Event, viewer eventViewer) (teamEvent, error) {
	return renderEventWith(r, viewer, liftTaskID)
}

// renderEventWith is renderEvent with the payload's taskId taken by lift when it can say (taskid.go).
func renderEventWith(r *eventlog.Event, viewer eventViewer, lift taskIDLifter) (teamEvent, error) {
	ev, err := projections.FromLog(r)
	if err != nil {
		return teamEvent{}, err
	}
	return renderDecodedWith(r, ev, viewer, lift)
}

// renderDecoded is renderEvent of r, whose payload ev the caller has decoded already.
func renderDecoded(r *eventlog.Event, ev events.Event, viewer eventViewer) (teamEvent, error) {
	return renderDecodedWith(r, ev, viewer, liftTaskID)
}

func renderDecodedWith(r *eventlog.Event, ev events.Event, viewer eventViewer, lift taskIDLifter) (teamEvent, error) {
	data, err := json.Marshal(viewer.visiblePayload(ev.Payload))
	if err != nil {
		return teamEvent{}, fmt.Errorf("broker: encode %s payload: %w", ev.Type, err)
	}
	taskID, lifted := lift(ev.Payload)
	if !lifted || redactsDigests(ev.Type) {
		// Only the payload's JSON can say (taskid.go), or a digest may have to go: read it back.
		taskID = ""
		var fields map[string]json.RawMessage
		if json.Unmarshal(data, &fields) == nil && fields != nil {
			_, digest := fields["digest"]
			digest = digest && strings.HasPrefix(ev.Type, "credential.")
			_, nonce := fields["nonceDigest"]
			nonce = nonce && ev.Type == events.TypeJobCreated
			if digest || nonce {
				delete(fields, "digest")
				delete(fields, "nonceDigest")
				data, _ = json.Marshal(fields)
			}
		}
		if raw, ok := fields["taskId"]; ok {
			json.Unmarshal(raw, &taskID)
		}
	}
	te := teamEvent{
		Time:   time.Unix(0, ev.Time).UTC().Format(isoMillis),
		Type:   ev.Type,
		RunID:  ev.Stream,
		TaskID: taskID,
		Data:   data,
		Metadata: teamMetadata{
			Seq: ev.StreamVersion, Provenance: "api", Position: ev.Position, SchemaVersion: ev.SchemaVersion,
			CommandID: ev.CommandID, CausationID: ev.CausationID, CorrelationID: ev.CorrelationID, Actor: ev.Actor,
		},
	}
	if !viewer.seesCommandOf(r) {
		te.Metadata.CommandID = ""
	}
	if f := events.PayloadAs[events.ForeignImported](ev); f != nil {
		// Served as the source wrote it, so a pi-crew client reads back its own event.
		te.Type, te.TaskID, te.Message, te.Data = f.Type, f.TaskID, f.Message, json.RawMessage(`null`)
		if f.Data != "" && json.Valid([]byte(f.Data)) {
			te.Data = json.RawMessage(f.Data)
		}
		te.Metadata.Imported = &importedMeta{Type: ev.Type, Source: f.Source, Seq: f.Seq}
	} else if ask := events.PayloadAs[events.AskRequested](ev); ask != nil {
		te.Message = ask.Question // pi-crew puts the question in ask.requested's message (D§3.6)
	} else if strings.HasPrefix(ev.Type, "delegate.") {
		// pi-crew's recordDelegateEvent cuts the data's JSON, then puts the type before it (D§3.5).
		te.Message = ev.Type + ": " + truncateUTF16(string(data), 200)
	}
	return te, nil
}

// redactsDigests reports whether events of type t may carry a digest renderDecoded removes.
func redactsDigests(t string) bool {
	return strings.HasPrefix(t, "credential.") || t == events.TypeJobCreated
}

// omitData replaces an event's data that cannot fit in a frame; see teamMetadata.Omitted.
func (te teamEvent) omitData() teamEvent {
	te.Data, te.Message, te.Metadata.Omitted = json.RawMessage(`null`), "", true
	return te
}

// bare is an event that does not fit in a frame even without its data: omitted (omitData), and without the
// strings the log took from clients besides the run's id — its taskId, the command, causation and correlation
// ids, the actor's task — each up to 256 bytes, six times that escaped as JSON. An imported event shows its
// stored type (foreign.imported) without the source's. What is left crewlog sets itself and takes a few hundred
// bytes, but the run's id: bareOfRun leaves that out too (""), for the one run id that would not let it fit.
func (te teamEvent) bare() teamEvent {
	te = te.omitData()
	if te.Metadata.Imported != nil {
		te.Type, te.Metadata.Imported = te.Metadata.Imported.Type, nil
	}
	te.TaskID, te.Metadata.CommandID, te.Metadata.CausationID, te.Metadata.CorrelationID = "", "", "", ""
	te.Metadata.Actor.TaskID = ""
	return te
}

// bareOfRun is bare without the run's id, the smallest rendition of an event: it fits in the smallest frame.
func (te teamEvent) bareOfRun() teamEvent {
	te = te.bare()
	te.RunID = ""
	return te
}

// fitEvent encodes te, or when it takes more than room bytes (plus one, the comma or newline after it) the first
// of omitData, bare and bareOfRun that fits; when none does, bareOfRun's, which the caller's frame then refuses.
func fitEvent(te teamEvent, room int) ([]byte, error) {
	var b []byte
	for _, render := range []func(teamEvent) teamEvent{same[teamEvent], teamEvent.omitData, teamEvent.bare,
		teamEvent.bareOfRun} {
		var err error
		if b, err = render(te).encodeJSON(); err != nil {
			return nil, err
		}
		if len(b)+1 <= room {
			break
		}
	}
	return b, nil
}

// truncateUTF16 cuts s to at most n UTF-16 units (pi-crew slices JavaScript strings), never inside a character.
func truncateUTF16(s string, n int) string {
	units := 0
	for i, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if units+w > n {
			return s[:i]
		}
		units += w
	}
	return s
}

// seesCommandOf reports whether the viewer may read the command id of r: the admin and the run's orchestrator see
// every id of what they may read; a worker only the ids of its own commands.
func (id identity) seesCommandOf(r *eventlog.Event) bool {
	if id.role != events.RoleWorker {
		return true
	}
	return events.EventPrincipal(r.ActorRole, r.Stream, r.ActorTask, r.CorrelationID) == id.principal()
}
