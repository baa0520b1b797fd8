package picrew

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/crewlog/crewlog/events"
)

// Caller is a connection to the daemon with the admin credential: the
// broker client's Call and Close.
type Caller interface {
	Call(ctx context.Context, method string, params any, result any) error
	Close() error
}

// DaemonSink is the Sink of a running crewd: import.append and
// import.checkpoints over its socket. A failed call drops the connection,
// and the next call dials again, so a daemon that restarts under the
// follower is reconnected to.
//
// Concurrency: safe for one goroutine (the Follower's).
type DaemonSink struct {
	dial func(ctx context.Context) (Caller, error)
	mu   sync.Mutex
	c    Caller
}

// NewDaemonSink returns a sink that connects with dial when it needs to.
func NewDaemonSink(dial func(ctx context.Context) (Caller, error)) *DaemonSink {
	return &DaemonSink{dial: dial}
}

func (d *DaemonSink) call(ctx context.Context, method string, params, result any) error {
	d.mu.Lock()
	c := d.c
	d.mu.Unlock()
	if c != nil {
		// A connection kept from an earlier call may have been closed by a
		// daemon that restarted since: one retry on a fresh one (the
		// command ids make sending twice safe).
		if err := d.try(ctx, c, method, params, result); err == nil || ctx.Err() != nil {
			return err
		}
	}
	c, err := d.dial(ctx)
	if err != nil {
		return fmt.Errorf("picrew: connect to the daemon: %w", err)
	}
	d.mu.Lock()
	d.c = c
	d.mu.Unlock()
	return d.try(ctx, c, method, params, result)
}

// try calls on c, dropping c when the call fails.
func (d *DaemonSink) try(ctx context.Context, c Caller, method string, params, result any) error {
	err := c.Call(ctx, method, params, result)
	if err != nil {
		d.mu.Lock()
		if d.c == c {
			d.c = nil
		}
		d.mu.Unlock()
		c.Close()
	}
	return err
}

// Close closes the connection, if any.
func (d *DaemonSink) Close() error {
	d.mu.Lock()
	c := d.c
	d.c = nil
	d.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Close()
}

// The import.append params and result (docs/protocol.md).
type wireWrite struct {
	CommandID string      `json:"commandId"`
	RunID     string      `json:"runId"`
	Events    []wireEvent `json:"events"`
}

type wireEvent struct {
	Type    string `json:"type"`
	Time    int64  `json:"time,omitempty"`
	Payload any    `json:"payload"`
}

type wireResult struct {
	Appended int  `json:"appended"`
	Replayed bool `json:"replayed"`
	Error    *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// wire is w as import.append's params carry it.
func (w Write) wire() wireWrite {
	ww := wireWrite{CommandID: w.ID, RunID: w.RunID, Events: make([]wireEvent, len(w.Items))}
	for j, it := range w.Items {
		ww.Events[j] = wireEvent{Type: it.Type, Time: it.TimeMs, Payload: it.Payload}
	}
	return ww
}

// encodedSize is how many bytes w adds to import.append's params: its JSON
// as the broker client encodes the params (json.Marshal), and the comma
// that separates it from the next write.
func (w Write) encodedSize() (int, error) {
	b, err := json.Marshal(w.wire())
	if err != nil {
		return 0, err
	}
	return len(b) + 1, nil
}

// Import implements Sink with import.append.
func (d *DaemonSink) Import(ctx context.Context, ws []Write) ([]WriteResult, error) {
	params := struct {
		Source string      `json:"source"`
		Writes []wireWrite `json:"writes"`
	}{Source: events.ForeignSourcePicrew, Writes: make([]wireWrite, len(ws))}
	for i, w := range ws {
		params.Writes[i] = w.wire()
	}
	var res struct {
		Results []wireResult `json:"results"`
	}
	if err := d.call(ctx, "import.append", params, &res); err != nil {
		return nil, err
	}
	if len(res.Results) != len(ws) {
		return nil, errors.New("picrew: import.append answered another number of writes than it was sent")
	}
	out := make([]WriteResult, len(ws))
	for i, r := range res.Results {
		out[i] = WriteResult{Appended: r.Appended, Replayed: r.Replayed}
		if r.Error != nil {
			out[i].Code, out[i].Message = r.Error.Code, r.Error.Message
		}
	}
	return out, nil
}

// Checkpoints implements Sink with import.checkpoints, page by page.
func (d *DaemonSink) Checkpoints(ctx context.Context) ([]events.ImportCheckpoint, error) {
	var out []events.ImportCheckpoint
	cursor := ""
	for {
		params := map[string]any{"source": events.ForeignSourcePicrew}
		if cursor != "" {
			params["cursor"] = cursor
		}
		var page struct {
			Checkpoints []events.ImportCheckpoint `json:"checkpoints"`
			NextCursor  string                    `json:"nextCursor"`
		}
		if err := d.call(ctx, "import.checkpoints", params, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Checkpoints...)
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
}
