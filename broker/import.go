package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// The import methods let a follower of another runtime's files (crewctl import picrew --follow) import through
// the running daemon instead of opening the store: import.append submits the follower's records as the engine's
// commands, import.checkpoints reads back how far it got.
const (
	methodImportAppend      = "import.append"
	methodImportCheckpoints = "import.checkpoints"
)

// Bounds of import.append: a frame holds at most MaxImportWrites writes, each of 1..commands.MaxImportEvents
// events; the frame cap bounds the bytes.
const MaxImportWrites = 256

// importWrite is one write of import.append's params.
type importWrite struct {
	CommandID importCommandID `json:"commandId"`
	RunID     string          `json:"runId"`
	Events    []importEvent   `json:"events"`
}

// importCommandID is a write's commandId, and whether its JSON spelt a lone UTF-16 surrogate
// (wire.HoldsLoneSurrogate), which decoding reads as U+FFFD: "import:r\ud800" and "import:r\udc00" would be one id.
type importCommandID struct {
	id   string
	lone bool
}

func (c *importCommandID) UnmarshalJSON(raw []byte) error {
	c.lone = wire.HoldsLoneSurrogate(raw)
	return json.Unmarshal(raw, &c.id)
}

type importEvent struct {
	Type    string          `json:"type"`
	Time    int64           `json:"time"` // unix ms in the source; 0 = now
	Payload json.RawMessage `json:"payload"`
}

// importOutcome is one write's answer: appended (or, replayed, recorded by an earlier attempt), or an error.
type importOutcome struct {
	CommandID string      `json:"commandId"`
	Appended  int         `json:"appended"`
	Replayed  bool        `json:"replayed,omitempty"`
	Position  uint64      `json:"position,omitempty"`
	Error     *wire.Error `json:"error,omitempty"`
}

type importAppendResult struct {
	Results []importOutcome `json:"results"`
}

// handleImportAppend: admin only, {source, writes:[{commandId, runId, events:[{type, time, payload}]}]} →
// {results}. Each write is one commands.Import submitted under events.EnginePrincipal, so its command id is in
// the engine's namespace (the one-shot import's): a write already recorded answers replayed and appends nothing.
// The writes are queued in order and decided in that order (commands.Engine.SubmitAll); one write's refusal does
// not stop the others (each has its own result).
func handleImportAppend(cl *call) (any, error) {
	if cl.c.id.role != events.RoleAdmin {
		return nil, forbidden("%s: admin only", cl.method)
	}
	p := readParams(cl)
	source := p.str("source", true, commands.MaxImportSourceChars)
	raw, _ := p.get("writes")
	p.strict()
	if p.err != nil {
		return nil, p.err
	}
	var writes []importWrite
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if len(raw) == 0 || raw[0] != '[' || dec.Decode(&writes) != nil {
		return nil, badParams(cl.method, "writes must be an array of {commandId, runId, events}")
	}
	if len(writes) == 0 || len(writes) > MaxImportWrites {
		return nil, badParams(cl.method, "writes must hold 1..%d writes", MaxImportWrites)
	}
	reqs := make([]commands.Request, 0, len(writes))
	for i, w := range writes {
		cmd, err := importCommand(source, w)
		if err != nil {
			return nil, badParams(cl.method, "write %d: %v", i, err)
		}
		reqs = append(reqs, commands.Request{Principal: events.EnginePrincipal(), CommandID: w.CommandID.id,
			Actor: events.Actor{Role: events.RoleAdmin}, Command: cmd})
	}
	replies, err := cl.c.s.eng.SubmitAll(cl.c.ctx, reqs)
	if err != nil {
		return nil, err
	}
	out := importAppendResult{Results: make([]importOutcome, len(replies))}
	for i, r := range replies {
		o := importOutcome{CommandID: writes[i].CommandID.id, Replayed: r.Replayed, Position: r.Position}
		if r.Rejected != nil {
			o.Error, _ = toWire(r.Rejected, cl.method)
		} else {
			var res commands.ImportResult
			if json.Unmarshal(r.Result, &res) == nil {
				o.Appended = res.Appended
			}
			if r.Replayed {
				o.Appended = 0
			}
		}
		out.Results[i] = o
	}
	return out, nil
}

// importCommand checks one write's shape and decodes its payloads into the event types' structs (strictly: an
// unknown field is refused, so nothing a source sent is silently lost). The engine decides the rest.
func importCommand(source string, w importWrite) (*commands.Import, error) {
	// NB: the import's namespace alone: its ids are the engine principal's, as the clock's and the migrations' are.
	if w.CommandID.lone {
		return nil, errors.New(msgLoneSurrogate)
	}
	if id := w.CommandID.id; !strings.HasPrefix(id, commands.ImportIDPrefix) || len(id) > maxCommandID ||
		!utf8.ValidString(id) {
		return nil, fmt.Errorf("commandId must be a string of at most %d bytes starting %q", maxCommandID,
			commands.ImportIDPrefix)
	}
	if n := len(w.Events); n == 0 || n > commands.MaxImportEvents {
		return nil, fmt.Errorf("events must hold 1..%d events", commands.MaxImportEvents)
	}
	cmd := &commands.Import{Source: source, RunID: w.RunID, Events: make([]commands.ImportedEvent, 0, len(w.Events))}
	for j, e := range w.Events {
		pl := events.NewPayload(e.Type)
		if pl == nil {
			return nil, fmt.Errorf("event %d: unknown type %q", j, e.Type)
		}
		d := json.NewDecoder(bytes.NewReader(e.Payload))
		d.DisallowUnknownFields()
		if len(e.Payload) == 0 || e.Payload[0] != '{' || d.Decode(pl) != nil {
			return nil, fmt.Errorf("event %d: payload is not a %s object", j, e.Type)
		}
		cmd.Events = append(cmd.Events, commands.ImportedEvent{Type: e.Type, TimeMs: e.Time, Payload: pl})
	}
	return cmd, nil
}

// maxCheckpointPage bounds one import.checkpoints answer.
const maxCheckpointPage = 1000

type importCheckpointsResult struct {
	Checkpoints []events.ImportCheckpoint `json:"checkpoints"`
	NextCursor  string                    `json:"nextCursor,omitempty"`
}

// handleImportCheckpoints: admin only, {source, cursor?, limit?} → {checkpoints, nextCursor?}: the newest checkpoint
// of every file the source's imports recorded, by path, from the path after cursor, the page cut to what fits in a
// frame as the other pages are (fitPage). It reads the checkpoint stream's view and the checkpoints recorded after it
// (projections.ImportCheckpoints), so it costs one decode per file plus one per checkpoint since the view, not one
// per checkpoint ever recorded; a read that folded many saves a new view.
func handleImportCheckpoints(cl *call) (any, error) {
	if cl.c.id.role != events.RoleAdmin {
		return nil, forbidden("%s: admin only", cl.method)
	}
	p := readParams(cl)
	source := p.str("source", true, commands.MaxImportSourceChars)
	cursor := p.str("cursor", false, events.MaxImportPathChars)
	limit := int(p.int("limit", 1, maxCheckpointPage, maxCheckpointPage))
	p.strict()
	if p.err != nil {
		return nil, p.err
	}
	s := cl.c.s
	set, err := projections.LoadImportCheckpoints(cl.c.ctx, s.log)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errReplay, err)
	}
	if set.SaveDue() {
		s.saveImportView(set)
	}
	cks := checkpointsAfter(set, source, cursor) // in path order
	// The cursor names the path of the page's last checkpoint: the next page starts at the first path left out.
	pg, err := fitPage(cl, limit, func(limit int) (page[events.ImportCheckpoint], error) {
		p := page[events.ImportCheckpoint]{items: cks[:min(limit, len(cks))]}
		if limit < len(cks) {
			p.next = checkpointCursor(cks[limit-1].Path)
		}
		return p, nil
	}, func(c events.ImportCheckpoint) events.ImportCheckpoint { return c })
	if err != nil {
		return nil, err
	}
	return importCheckpointsResult{Checkpoints: pg.items, NextCursor: pg.next}, nil
}
