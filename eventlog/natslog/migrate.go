package natslog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/crewlog/crewlog/eventlog"
)

// ErrStreamNotEmpty is returned by Import into a stream that holds groups.
var ErrStreamNotEmpty = errors.New("natslog: the stream is not empty; import only into a new stream")

// ErrImportUnfinished is returned by Open (and EnsureStream) for a stream an Import into did not finish: stopped
// part-way (killed, its connection lost) or refused by its check, it holds a prefix of the store at most, which a
// crewd would serve as the whole log. Import marks the stream (importMark) before it publishes and unmarks it once
// its copy is checked. NB: no import resumes one: the stream is deleted (nats stream rm) and the import run again,
// from the store, which it left as it was.
var ErrImportUnfinished = errors.New("an import into it did not finish (crewctl migrate-store --to jetstream " +
	"stopped part-way, or is still running), and it may hold only part of the store: delete the stream " +
	"(nats stream rm) and run the import again")

// importMark is the key of the stream's metadata that marks it while an Import fills it.
const importMark = "crewlog-import"

// ImportReport tells what Import copied.
type ImportReport struct {
	Groups   int    // groups committed (each one atomic batch, or more for a large one)
	Events   uint64 // = the source's head
	Outcomes int
}

// importGroupWrites and importGroupBytes bound one imported group, as the
// engine's MaxGroup bounds a decided one: Commit cuts a group into atomic
// batches by the server's limits anyway, so these only keep a group's
// encoding in memory small.
const (
	importGroupWrites = 256
	importGroupBytes  = 512 << 10
)

// Import copies src, a Pebble store, into the empty stream dst is bound to
// (dst's local log must be empty too): its events, in order, regrouped into
// writes by the outcomes that recorded them, and every outcome, those that
// wrote no events included. Snapshots are not copied (an optimisation
// only). It then checks that dst's local copy — built by the same appends
// every crewd's copy will make — has the source's head and hash (so every
// record and the hash chain are identical) and as many outcomes. The stream
// is marked from before the first group until that check passed: until
// then Open refuses it (ErrImportUnfinished).
func Import(ctx context.Context, src *eventlog.Log, dst *Log) (ImportReport, error) {
	var rep ImportReport
	if dst.Sequence() != 0 {
		return rep, ErrStreamNotEmpty
	}
	if info, err := dst.stream.Info(ctx); err != nil {
		return rep, fmt.Errorf("natslog: stream info: %w", err)
	} else if info.State.LastSeq != 0 {
		return rep, ErrStreamNotEmpty
	}
	if head, _ := dst.local.Head(); head != 0 {
		return rep, fmt.Errorf("natslog: import needs an empty local log, this one is at %d", head)
	}
	if err := markImport(ctx, dst, true); err != nil {
		return rep, err
	}
	byFirst := make(map[uint64]eventlog.Outcome)
	var eventless []eventlog.Outcome
	if err := src.Outcomes(func(o eventlog.Outcome) error {
		o.Result, o.Fingerprint = bytes.Clone(o.Result), bytes.Clone(o.Fingerprint)
		if o.Count == 0 {
			eventless = append(eventless, o)
		} else {
			byFirst[o.First] = o
		}
		rep.Outcomes++
		return nil
	}); err != nil {
		return rep, err
	}

	var group []eventlog.Write
	size := 0
	flush := func() error {
		if len(group) == 0 {
			return nil
		}
		if _, err := dst.Commit(group); err != nil {
			return err
		}
		rep.Groups++
		importCommitted()
		group, size = nil, 0
		return ctx.Err()
	}
	add := func(w eventlog.Write, bytes int) error {
		group = append(group, w)
		size += bytes
		if len(group) >= importGroupWrites || size >= importGroupBytes {
			return flush()
		}
		return nil
	}
	it := src.Read(1)
	lim := dst.limits()
	var cur *eventlog.Write // the write being filled
	curLeft := uint64(0)    // events cur still takes (an outcome's count)
	curBytes := 0
	var curPack packer // cur's messages, as planBatches counts them
	for it.Next() {
		e := *it.Event()
		e.Hash = [32]byte{}
		// NB: the store does not tell where the write of a command without an id ended, so consecutive events of
		// such commands are one write, as many as fit one batch and importGroupBytes: one write of the whole run did
		// not fit a batch once it alternated between crewlog streams more often than a batch holds messages
		// (ErrGroupTooLarge, and the store could not be imported), and was held in memory whole. Any cut gives the
		// same records: an append assigns each event its position, version and hash whatever write holds it.
		if cur != nil && curLeft == 0 && (cur.CommandID != "" || e.CommandID != "" ||
			byFirst[e.Position].CommandID != "" || curBytes >= importGroupBytes || !curPack.fitsWith(&e)) {
			if err := add(*cur, curBytes); err != nil {
				it.Close()
				return rep, err
			}
			cur = nil
		}
		if cur == nil {
			cur, curBytes, curPack = &eventlog.Write{}, 0, newPacker(lim)
			if o, ok := byFirst[e.Position]; ok {
				cur.Principal, cur.CommandID, cur.Code, cur.Reason = o.Principal, o.CommandID, o.Code, o.Reason
				cur.Result, cur.Fingerprint = o.Result, o.Fingerprint
				curLeft = o.Count
			} else if e.CommandID != "" {
				it.Close()
				return rep, fmt.Errorf("natslog: position %d carries command id %q, and no outcome starts there",
					e.Position, e.CommandID)
			}
		}
		cur.Events = append(cur.Events, e)
		curBytes += len(e.Payload) + 128
		curPack.add(&e)
		if curLeft > 0 {
			curLeft--
		}
		rep.Events++
	}
	if err := it.Close(); err != nil {
		return rep, err
	}
	if cur != nil {
		if err := add(*cur, curBytes); err != nil {
			return rep, err
		}
	}
	for _, o := range eventless {
		if err := add(eventlog.Write{Principal: o.Principal, CommandID: o.CommandID, Code: o.Code, Reason: o.Reason,
			Result: o.Result, Fingerprint: o.Fingerprint}, len(o.Result)+64); err != nil {
			return rep, err
		}
	}
	if err := flush(); err != nil {
		return rep, err
	}
	if err := verifyCopy(src, dst.local, rep.Outcomes); err != nil {
		return rep, err
	}
	return rep, markImport(ctx, dst, false)
}

// markImport sets (on) or removes the stream's importMark. NB: set before the first group is published, so that a
// stream holding part of an import is never unmarked.
func markImport(ctx context.Context, dst *Log, on bool) error {
	info, err := dst.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("natslog: stream info: %w", err)
	}
	cfg := info.Config
	cfg.Metadata = maps.Clone(cfg.Metadata)
	if on {
		if cfg.Metadata == nil {
			cfg.Metadata = map[string]string{}
		}
		cfg.Metadata[importMark] = "unfinished"
	} else {
		delete(cfg.Metadata, importMark)
	}
	if _, err := dst.js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("natslog: mark the stream's import: %w", err)
	}
	return nil
}

// verifyCopy checks that copy holds what src holds: the same head and hash
// (every record, through the chain) and as many outcomes.
func verifyCopy(src, copy *eventlog.Log, outcomes int) error {
	h1, hash1 := src.Head()
	h2, hash2 := copy.Head()
	if h1 != h2 || hash1 != hash2 {
		return fmt.Errorf("natslog: the copy ends at %d (hash %x), the source at %d (hash %x)", h2, hash2[:8], h1,
			hash1[:8])
	}
	n := 0
	if err := copy.Outcomes(func(eventlog.Outcome) error { n++; return nil }); err != nil {
		return err
	}
	if n != outcomes {
		return fmt.Errorf("natslog: the copy holds %d outcomes, the source %d", n, outcomes)
	}
	return nil
}

// importCommitted is called once each group Import publishes is committed; a test stops the import there, as a crash
// or kill -9 of the process would.
var importCommitted = func() {}
