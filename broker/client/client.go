package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crewlog/crewlog/broker/wire"
)

// DefaultDialTimeout bounds connect plus hello when the context has no earlier deadline (pi-crew's client uses the
// same 5 s, D§7.9).
const DefaultDialTimeout = 5 * time.Second

// DefaultEventBuffer is how many pushed frames a Subscription holds before its reader stops reading the socket;
// the broker then queues, and past its own cap sends a resync.
const DefaultEventBuffer = 256

// writeQueue bounds requests encoded but not yet written; callers beyond it wait (or give up with their context).
const writeQueue = 64

// drainAfterWriteError bounds how long the reader reads on after a write failed. The broker writes its final
// error frame before it closes the connection, so a write can fail on that close while the frame still waits to be
// read; a broker that closed is at EOF right after it, so the bound only matters for a peer that stopped reading
// but not writing.
const drainAfterWriteError = 5 * time.Second

// ErrClosed matches every error that says the connection is gone: Close was called, the broker closed it, or a
// read, write or framing error ended it. A request pending at that moment may or may not have been decided.
var ErrClosed = errors.New("client: connection closed")

// Hello is who the client says it is. For the admin credential set Role to "admin" and Token only; a worker sets
// RunID, TaskID and Token; an orchestrator the same with TaskID "orchestrator". The broker takes the role from the
// token, never from Role, which only tells the admin hello apart.
//
// NB: Token is a secret; String leaves it out.
type Hello struct {
	Role   string
	RunID  string
	TaskID string
	Token  string
}

// String describes h without its token.
func (h Hello) String() string {
	return "hello{role:" + h.Role + " runId:" + h.RunID + " taskId:" + h.TaskID + " token:***}"
}

// MarshalJSON encodes the hello params: {"protocol":1,"role":"admin","token":…} for the admin, {"protocol":1,
// "runId":…,"taskId":…,"token":…} otherwise; empty fields are left out.
func (h Hello) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Protocol int    `json:"protocol"`
		Role     string `json:"role,omitempty"`
		RunID    string `json:"runId,omitempty"`
		TaskID   string `json:"taskId,omitempty"`
		Token    string `json:"token"`
	}{wire.ProtocolVersion, h.Role, h.RunID, h.TaskID, h.Token})
}

// Options tune a Client. A nil *Options means all defaults; zero fields mean their default.
type Options struct {
	// MaxFrame is the frame cap in both directions (0: wire.DefaultMaxFrame; else wire.ValidateMaxFrame's range).
	// It must be at least the broker's, or the client refuses frames the broker may send.
	MaxFrame int
	// DialTimeout bounds connect plus hello (default DefaultDialTimeout); the context's deadline still applies.
	DialTimeout time.Duration
	// OnMailbox receives mailbox.message pushes, in order, on the reader goroutine: it must return quickly and
	// must not wait for a Call on this Client or close it. Nil drops them. Subscriptions never call it.
	OnMailbox func(wire.Event)
	// EventBuffer is how many frames a Subscription buffers (default DefaultEventBuffer).
	EventBuffer int
	// CheckBroker, when set, is given the uid the kernel recorded for the process listening at the socket
	// (SO_PEERCRED) before the hello and its token are written; an error ends the dial. A socket path in a shared
	// directory may be another user's listener: a caller whose token only one uid may read refuses every other.
	CheckBroker func(uid int) error
}

func (o *Options) resolve() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.MaxFrame == 0 {
		r.MaxFrame = wire.DefaultMaxFrame
	}
	if r.DialTimeout == 0 {
		r.DialTimeout = DefaultDialTimeout
	}
	if r.EventBuffer == 0 {
		r.EventBuffer = DefaultEventBuffer
	}
	var errs []error
	if err := wire.ValidateMaxFrame(r.MaxFrame); err != nil {
		errs = append(errs, fmt.Errorf("client: %w", err))
	}
	if r.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("client: dial timeout %v is negative", r.DialTimeout))
	}
	if r.EventBuffer < 0 {
		errs = append(errs, fmt.Errorf("client: event buffer %d is negative", r.EventBuffer))
	}
	return r, errors.Join(errs...)
}

// Client is one authenticated connection to the broker.
//
// Concurrency: every method is safe for concurrent use. Errors: see the package documentation; once the
// connection is gone every Call returns an error matching ErrClosed.
type Client struct {
	conn  net.Conn
	path  string
	hello Hello
	opts  Options
	ack   wire.HelloAck

	out    chan []byte
	nextID atomic.Uint64

	mu      sync.Mutex
	pending map[string]chan wire.Response

	// sink receives team.event and resync frames; it is set only on a Subscription's connection.
	sink chan wire.Event

	done     chan struct{}
	failOnce sync.Once
	cause    error // why done was closed; written once before close(done)
	wg       sync.WaitGroup

	writeDead chan struct{} // closed when a write failed; the reader then ends the connection
	writeErr  error         // why the write failed; written once before close(writeDead)
}

// Dial connects to the broker at socketPath and authenticates with hello. It returns a *wire.Error (wrapped) when
// the broker refused the hello, and a local error when the connection or the deadline failed.
func Dial(ctx context.Context, socketPath string, hello Hello, opts *Options) (*Client, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	return dial(ctx, socketPath, hello, o, nil)
}

func dial(ctx context.Context, path string, hello Hello, o Options, sink chan wire.Event) (*Client, error) {
	ctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("client: connect: %w", err)
	}
	if o.CheckBroker != nil {
		if err := checkBroker(conn, o.CheckBroker); err != nil {
			conn.Close()
			return nil, err
		}
	}
	c := &Client{
		conn: conn, path: path, hello: hello, opts: o,
		out: make(chan []byte, writeQueue), pending: map[string]chan wire.Response{},
		sink: sink, done: make(chan struct{}), writeDead: make(chan struct{}),
	}
	c.wg.Add(2)
	go c.read()
	go c.write()
	if err := c.Call(ctx, wire.MethodHello, hello, &c.ack); err != nil {
		c.Close()
		return nil, fmt.Errorf("client: hello: %w", err)
	}
	return c, nil
}

// Ack is the broker's answer to the hello: its session and the run the connection is bound to.
func (c *Client) Ack() wire.HelloAck { return c.ack }

// Call sends method with params (any JSON-encodable value; nil is null) and decodes the result into result (nil
// discards it). See the package documentation for what each kind of error means.
func (c *Client) Call(ctx context.Context, method string, params any, result any) error {
	id, ch, err := c.start(ctx, method, params)
	if err != nil {
		return err
	}
	var resp wire.Response
	select {
	case resp = <-ch:
	case <-ctx.Done():
		c.forget(id)
		return fmt.Errorf("client: %s: %w", method, ctx.Err())
	case <-c.done:
		// The reader may have delivered the answer just before the connection ended.
		select {
		case resp = <-ch:
		default:
			return fmt.Errorf("client: %s: %w", method, c.cause)
		}
	}
	return decodeResult(method, resp, result)
}

func decodeResult(method string, resp wire.Response, result any) error {
	if resp.Error != nil {
		return fmt.Errorf("client: %s: %w", method, resp.Error)
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(resp.Result, result); err != nil {
		return fmt.Errorf("client: %s: decode result: %w", method, err)
	}
	return nil
}

// start registers and queues a request; its answer arrives on the returned channel. A Subscription uses it to keep
// consuming pushes while a subscribe request is in flight.
func (c *Client) start(ctx context.Context, method string, params any) (string, chan wire.Response, error) {
	if !wire.ValidMethod(method) {
		return "", nil, fmt.Errorf("client: method name %q is not valid", method)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return "", nil, fmt.Errorf("client: %s: encode params: %w", method, err)
	}
	id := strconv.FormatUint(c.nextID.Add(1), 10)
	// NB: json.Marshal's output is compact, valid JSON, so the frame copies it rather than compacting it again.
	frame, err := wire.AppendFrame(nil, wire.CompactRequest{ID: id, Method: method, Params: raw}, c.opts.MaxFrame)
	if err != nil {
		return "", nil, fmt.Errorf("client: %s: %w", method, err)
	}
	ch := make(chan wire.Response, 1)
	c.mu.Lock()
	c.pending[id] = ch
	c.mu.Unlock()
	select {
	case c.out <- frame:
		return id, ch, nil
	case <-ctx.Done():
		c.forget(id)
		return "", nil, fmt.Errorf("client: %s: %w", method, ctx.Err())
	case <-c.done:
		c.forget(id)
		return "", nil, fmt.Errorf("client: %s: %w", method, c.cause)
	}
}

// forget drops a request nobody waits for any more; its answer, if it comes, is discarded.
func (c *Client) forget(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// Close ends the connection. Pending and later calls fail with ErrClosed. It waits for the reader and writer
// goroutines, so it must not be called from OnMailbox. Close is idempotent and always returns nil.
func (c *Client) Close() error {
	c.fail(nil)
	c.wg.Wait()
	return nil
}

// Done is closed when the connection is gone; Err then tells why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is nil while the connection is up, and afterwards an error matching ErrClosed with the cause.
func (c *Client) Err() error {
	select {
	case <-c.done:
		return c.cause
	default:
		return nil
	}
}

// fail ends the connection once; cause nil means a local Close.
func (c *Client) fail(cause error) {
	c.failOnce.Do(func() {
		if cause == nil {
			c.cause = ErrClosed
		} else {
			c.cause = fmt.Errorf("%w: %w", ErrClosed, cause)
		}
		close(c.done)
		c.conn.Close()
	})
}

// write is the only goroutine that writes to the socket, so frames never interleave.
func (c *Client) write() {
	defer c.wg.Done()
	for {
		select {
		case frame := <-c.out:
			if _, err := c.conn.Write(frame); err != nil {
				c.writeFailed(err)
				return
			}
		case <-c.done:
			return
		}
	}
}

// writeFailed stops writing and leaves ending the connection to the reader. When the broker ends a connection it
// writes one error frame (revoked, stale-token, idle-timeout) and closes, so a request written after the close
// fails with "broken pipe" while that frame is still unread: failing now would close the socket under the reader
// and lose the broker's reason. The reader reads on to the broker's EOF (at most drainAfterWriteError), so the
// cause is the broker's frame when it sent one, else this write error.
func (c *Client) writeFailed(err error) {
	c.writeErr = fmt.Errorf("write: %w", err)
	close(c.writeDead)
	c.conn.SetReadDeadline(time.Now().Add(drainAfterWriteError))
}

// read is the only goroutine that reads the socket: it routes answers to their callers and pushes to their
// consumers.
func (c *Client) read() {
	defer c.wg.Done()
	r := wire.NewReader(c.conn, c.opts.MaxFrame)
	for {
		resp, push, err := r.ReadResponse()
		if err != nil {
			select {
			case <-c.writeDead: // the read failed because the connection is gone, which the write saw first
				c.fail(c.writeErr)
			default:
				c.fail(fmt.Errorf("read: %w", err))
			}
			return
		}
		if push.Frame != nil {
			err = c.dispatchPush(push)
		} else {
			err = c.dispatch(resp)
		}
		if err != nil {
			c.fail(err)
			return
		}
	}
}

// dispatch hands a response to the call waiting for it.
func (c *Client) dispatch(resp wire.Response) error {
	if resp.ID == "" && resp.Error != nil {
		// The broker ends the connection with a frame that answers no request (revoked, stale-token,
		// idle-timeout, too-many-connections): its error is why the connection is gone.
		return resp.Error
	}
	c.mu.Lock()
	ch, ok := c.pending[resp.ID]
	delete(c.pending, resp.ID)
	c.mu.Unlock()
	if ok {
		ch <- resp // buffered: never blocks
	}
	return nil
}

// dispatchPush routes a push to its consumer; a push nobody consumes is not decoded.
func (c *Client) dispatchPush(push wire.Push) error {
	frame := push.Frame
	var ev wire.Event
	switch push.Name {
	case wire.EventMailboxMessage:
		if c.opts.OnMailbox == nil || c.sink != nil {
			return nil
		}
		if err := json.Unmarshal(frame, &ev); err != nil {
			return fmt.Errorf("read: %w: %w", wire.ErrMalformed, err)
		}
		c.opts.OnMailbox(ev)
	case wire.EventTeamEvent, wire.EventResync:
		if c.sink == nil {
			return nil
		}
		if push.Name == wire.EventResync {
			var rs wire.Resync
			if err := json.Unmarshal(frame, &rs); err != nil {
				return fmt.Errorf("read: %w", err)
			}
			ev = wire.Event{Name: wire.EventResync, Seq: rs.FromSeq}
		} else if err := json.Unmarshal(frame, &ev); err != nil {
			return fmt.Errorf("read: %w: %w", wire.ErrMalformed, err)
		}
		// NB: blocking here is the back-pressure: the socket stops being read, the broker's queue for this
		// connection fills and it answers with a resync instead of growing.
		select {
		case c.sink <- ev:
		case <-c.done:
		}
	}
	// Other push names are a newer broker's; ignoring them keeps this client working with it.
	return nil
}
