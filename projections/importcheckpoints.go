package projections

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// ImportCheckpoints is the newest import checkpoint of every file an import
// recorded (events.ImportStream), by source and path: what a follower reads
// back when it starts (the broker's import.checkpoints).
//
// A follower records a checkpoint of every file it read further at most once
// a second, so the stream grows with the time files were followed, not with
// how many there are: a few files followed for a month leave millions of
// checkpoints behind a few thousand newest ones. The set is therefore kept as
// the stream's view (eventlog's stream views), refreshed now and then, and a
// read folds the view and only the checkpoints recorded after it:
//
//	view data  format:1 (importViewFormat) | uvarint stream version | msgpack [ImportCheckpoint …]
//
// stamped with the position of the stream's event at that version. The view
// is derived data: one that is missing, unreadable, of another format or not
// where the stream says it is, is ignored and the stream folded from its
// start.
type ImportCheckpoints struct {
	latest map[importKey]events.ImportCheckpoint
	// version and position are those of the last event folded (0: none).
	version, position uint64
	// Folded counts the checkpoints read from the stream rather than the
	// view: what a read would save if the view were saved now.
	Folded int
}

type importKey struct{ source, path string }

// importViewFormat is the first byte of the view's data.
const importViewFormat = 1

// ImportViewEvery is how many checkpoints read past the view make saving a
// new one worthwhile (ImportCheckpoints.SaveDue): a read then folds at most
// about that many, plus the view.
const ImportViewEvery = 4096

// LoadImportCheckpoints reads the view of the import stream, if there is a
// usable one, and folds the checkpoints recorded after it. It stops with
// ctx's error when ctx ends (checked every 256 checkpoints).
func LoadImportCheckpoints(ctx context.Context, l *eventlog.Log) (*ImportCheckpoints, error) {
	c := newImportCheckpoints()
	if !c.loadView(l) {
		return foldImportStream(ctx, l)
	}
	ok, err := c.foldTail(ctx, l)
	if err != nil || ok {
		return c, err
	}
	// A view that says it is further than the stream: not this stream's
	// (a store restored under it); fold from the start.
	return foldImportStream(ctx, l)
}

func newImportCheckpoints() *ImportCheckpoints {
	return &ImportCheckpoints{latest: map[importKey]events.ImportCheckpoint{}}
}

// foldImportStream folds the whole stream, ignoring the view.
func foldImportStream(ctx context.Context, l *eventlog.Log) (*ImportCheckpoints, error) {
	c := newImportCheckpoints()
	_, err := c.foldTail(ctx, l)
	return c, err
}

// foldTail folds the checkpoints after the last one c holds (the view's, or
// none: the whole stream); false when the stream does not go on where c
// says it ends.
func (c *ImportCheckpoints) foldTail(ctx context.Context, l *eventlog.Log) (bool, error) {
	it := l.ReadStream(events.ImportStream, c.version+1)
	defer it.Close()
	for first := true; it.Next(); first = false {
		ev := it.Event()
		if first && ev.Position <= c.position {
			return false, nil
		}
		if err := c.fold(ctx, ev); err != nil {
			return false, err
		}
	}
	return true, it.Err()
}

func (c *ImportCheckpoints) fold(ctx context.Context, ev *eventlog.Event) error {
	if c.Folded%256 == 255 {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	pl, err := events.DecodePayload(ev.Type, ev.SchemaVersion, ev.Payload)
	if err != nil {
		return fmt.Errorf("projections: import checkpoint at %d: %w", ev.Position, err)
	}
	if ck, ok := pl.(*events.ImportCheckpoint); ok {
		c.latest[importKey{ck.Source, ck.Path}] = *ck
	}
	c.version, c.position = ev.StreamVersion, ev.Position
	c.Folded++
	return nil
}

// loadView reads the view into c; false when there is no usable one.
func (c *ImportCheckpoints) loadView(l *eventlog.Log) bool {
	err := l.ViewFunc(events.ImportStream, func(pos uint64, b []byte) error {
		if len(b) < 2 || b[0] != importViewFormat {
			return errors.New("another format")
		}
		version, n := binary.Uvarint(b[1:])
		if n <= 0 || version == 0 {
			return errors.New("no version")
		}
		// NB: checked first, as a snapshot is: msgpack makes the slice an array header claims before reading an
		// element, and a garbled header would ask for more memory than there is, which no recover survives.
		if err := checkMsgpack(b[1+n:], 1); err != nil {
			return err
		}
		var cks []events.ImportCheckpoint
		if err := msgpack.Unmarshal(b[1+n:], &cks); err != nil {
			return err
		}
		for i := range cks {
			if err := cks[i].Validate(); err != nil {
				return err
			}
			c.latest[importKey{cks[i].Source, cks[i].Path}] = cks[i]
		}
		c.version, c.position = version, pos
		return nil
	})
	return err == nil
}

// SaveDue tells whether enough was folded past the view to save a new one.
func (c *ImportCheckpoints) SaveDue() bool { return c.Folded >= ImportViewEvery }

// Save writes c as the stream's view (nothing when c folded nothing).
func (c *ImportCheckpoints) Save(l *eventlog.Log) error {
	if c.version == 0 {
		return nil
	}
	all := c.Of("", "")
	b := binary.AppendUvarint([]byte{importViewFormat}, c.version)
	enc, err := msgpack.Marshal(all)
	if err != nil {
		return fmt.Errorf("projections: import checkpoints view: %w", err)
	}
	return l.SaveView(events.ImportStream, c.position, append(b, enc...))
}

// Of returns the newest checkpoint of every path of source after the path
// after, in path order ("" source: every source's, by source then path).
func (c *ImportCheckpoints) Of(source, after string) []events.ImportCheckpoint {
	var out []events.ImportCheckpoint
	for k, ck := range c.latest {
		if (source == "" || k.source == source) && k.path > after {
			out = append(out, ck)
		}
	}
	slices.SortFunc(out, func(a, b events.ImportCheckpoint) int {
		if n := strings.Compare(a.Source, b.Source); n != 0 {
			return n
		}
		return strings.Compare(a.Path, b.Path)
	})
	return out
}
