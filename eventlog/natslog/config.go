package natslog

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config names one crewlog log in JetStream and how it is replicated.
type Config struct {
	// Stream is the JetStream stream name (letters, digits, '-' and '_');
	// its groups' manifests go to subject crewlog.<Stream>.groups, the
	// events of crewlog stream s to crewlog.<Stream>.events.<token of s>
	// (subject.go).
	Stream string
	// Replicas is the stream's (and the writer lease's) replication factor,
	// 1..5; 3 survives the loss of one NATS node.
	Replicas int
	// Existing binds only a stream that exists (an operator's copy, a
	// verify): EnsureStream then never creates one, and Replicas is not
	// checked.
	Existing bool
	// PublishTimeout bounds one group's publish (default 10 s). A publish
	// that times out is in doubt: the writer fails stop and its successor
	// learns from the stream whether the group committed.
	PublishTimeout time.Duration
	// MaxBatchMessages bounds the messages of one atomic batch (default
	// DefaultMaxBatchMessages, the server's default). Set it to the
	// servers' jetstream limits max_batch_size when that is lower: a
	// larger batch would be refused whole, and the writer fail stop.
	MaxBatchMessages int
}

var streamName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if !streamName.MatchString(c.Stream) {
		errs = append(errs, fmt.Errorf("natslog: stream name %q must be 1..64 of A-Z a-z 0-9 _ -", c.Stream))
	}
	if !c.Existing && (c.Replicas < 1 || c.Replicas > 5) {
		errs = append(errs, fmt.Errorf("natslog: replicas %d must be 1..5", c.Replicas))
	}
	if c.PublishTimeout < 0 {
		errs = append(errs, fmt.Errorf("natslog: negative publish timeout"))
	}
	if c.MaxBatchMessages != 0 && c.MaxBatchMessages < 2 {
		errs = append(errs, fmt.Errorf("natslog: max batch messages %d must be at least 2", c.MaxBatchMessages))
	}
	return errors.Join(errs...)
}

func (c Config) publishTimeout() time.Duration {
	if c.PublishTimeout == 0 {
		return 10 * time.Second
	}
	return c.PublishTimeout
}

func (c Config) maxBatchMessages() int {
	if c.MaxBatchMessages == 0 {
		return DefaultMaxBatchMessages
	}
	return c.MaxBatchMessages
}

// Subject is where the manifests of the stream's groups are published
// (and, in the first layout, whole groups).
func (c Config) Subject() string { return "crewlog." + c.Stream + ".groups" }

// CommandSubject is where followers forward commands to the writer.
func (c Config) CommandSubject() string { return "crewlog." + c.Stream + ".commands" }

// leaseBucket is the KV bucket of the writer lease.
func (c Config) leaseBucket() string { return "crewlog_" + c.Stream + "_writer" }

// The layouts of a crewlog stream in JetStream.
type layout int

const (
	// layoutGroup is the first: one subject, crewlog.<Stream>.groups, a
	// whole group per message. Copies read it; crewds do not write it.
	layoutGroup layout = iota + 1
	// layoutBatch is this one (batch.go): the groups subject for
	// manifests, a subject per crewlog stream for events, atomic batches.
	layoutBatch
)

// errFirstLayout refuses to write a stream of the first layout.
var errFirstLayout = errors.New("it has crewlog's first layout (one subject, a whole group per message), " +
	"which crewd no longer writes: copy it to a new stream with " +
	"'crewctl migrate-store --to pebble --data NEWDIR --nats URL --stream OLD', then " +
	"'crewctl migrate-store --to jetstream --data NEWDIR --nats URL --stream NEW --replicas 3', " +
	"and start the crewds on NEW")

// EnsureStream creates the stream if it does not exist and checks that an
// existing one is fit to be a crewlog log: one that crewds write, or with
// Existing (a copy, a verify) also one of the first layout, which copies
// still read.
//
// NB: messages are never removed (no limits, deletes and purges denied):
// the stream is the log, and crewlog keeps its own outcome table forever,
// so JetStream's duplicate window plays no part.
func EnsureStream(ctx context.Context, js jetstream.JetStream, c Config) (jetstream.Stream, error) {
	st, _, err := ensureStream(ctx, js, c)
	return st, err
}

func ensureStream(ctx context.Context, js jetstream.JetStream, c Config) (jetstream.Stream, layout, error) {
	if err := c.Validate(); err != nil {
		return nil, 0, err
	}
	if c.Existing {
		st, err := callAPI(ctx, func(ctx context.Context) (jetstream.Stream, error) { return js.Stream(ctx, c.Stream) })
		if err != nil {
			return nil, 0, fmt.Errorf("natslog: stream %s: %w", c.Stream, err)
		}
		l, err := checkStream(st, c)
		return st, l, err
	}
	// NB: asked again only while JetStream is unavailable: nothing was
	// created then, and a create of the same stream is answered with it.
	st, err := callAPI(ctx, func(ctx context.Context) (jetstream.Stream, error) {
		st, err := js.CreateStream(ctx, jetstream.StreamConfig{
			Name: c.Stream, Subjects: []string{c.Subject(), c.eventsWildcard()}, Storage: jetstream.FileStorage,
			Replicas: c.Replicas, Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardNew, DenyDelete: true,
			DenyPurge: true, AllowDirect: true, AllowAtomicPublish: true,
			Description: "crewlog event log: a group per atomic batch, a subject per crewlog stream",
		})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			st, err = js.Stream(ctx, c.Stream)
		}
		return st, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("natslog: stream %s: %w", c.Stream, err)
	}
	l, err := checkStream(st, c)
	if err == nil && l != layoutBatch {
		err = fmt.Errorf("natslog: stream %s: %w", c.Stream, errFirstLayout)
	}
	return st, l, err
}

// apiTimeout bounds one JetStream API call (stream and bucket create, stream
// info). A variable for tests only.
var apiTimeout = 10 * time.Second

// apiContext bounds a JetStream API call by apiTimeout, whatever the caller's
// deadline. NB: jetstream applies its own default timeout only to a context
// without a deadline; crewd opens under --open-timeout (2 minutes), so a reply
// lost while NATS moved a leader held a starting crewd that long (found by the
// cluster's Jepsen run). A call that times out fails the start, and the
// supervisor starts crewd again.
func apiContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, apiTimeout)
}

// jsErrClusterNotAvail is nats-server's answer to a JetStream API request
// while JetStream's meta group, or the stream's, has no leader ("JetStream
// system temporarily unavailable"): it did nothing, and a leader is being
// elected (a NATS node stopped or cut off).
const jsErrClusterNotAvail jetstream.ErrorCode = 10008

// callAPI makes the JetStream API call f, bounded by apiTimeout as a whole
// (apiContext), and makes it again, after a short wait, while JetStream
// answers that it is temporarily unavailable. Only for calls that are
// harmless to repeat: reads, and creates of what exists already.
func callAPI[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	return callAgainWhile(ctx, jetStreamUnavailable, f)
}

// getMsg reads the stream's message at seq as callAPI calls, and also asks
// again while nothing answers the read: a stream that allows direct gets
// (crewlog's do) serves them from its replicas on $JS.API.DIRECT.GET, not
// through the API, and while none of them answers (a stream leader being
// elected, replicas catching up) the request fails with no responders (a
// 503 status) instead of JetStream's unavailable answer.
//
// It also asks again while the message is not found: seq is one a local
// copy holds, so the stream has stored it (nothing is ever removed from a
// crewlog stream), and a not-found comes from a replica that has not
// applied it yet: in the cluster's Jepsen run a crewd started right after
// a fault met it, and failed its start for it. A message that is really
// gone still fails, once the call's bound has passed.
func getMsg(ctx context.Context, st jetstream.Stream, seq uint64) (*jetstream.RawStreamMsg, error) {
	return callAgainWhile(ctx, func(err error) bool {
		return jetStreamUnavailable(err) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrMsgNotFound)
	}, func(ctx context.Context) (*jetstream.RawStreamMsg, error) { return st.GetMsg(ctx, seq) })
}

// jetStreamUnavailable reports whether err is JetStream's answer that it is
// temporarily unavailable (jsErrClusterNotAvail): nothing was done.
func jetStreamUnavailable(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrClusterNotAvail
}

// callAgainWhile makes the call f, bounded by apiTimeout as a whole
// (apiContext), and makes it again, after a short wait growing to a
// second, while transient says its error is.
func callAgainWhile[T any](ctx context.Context, transient func(error) bool,
	f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := apiContext(ctx)
	defer cancel()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		v, err := f(ctx)
		if err == nil || !transient(err) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait):
		}
	}
}

// checkStream refuses a stream that is not fit to be a crewlog log (one an
// Import did not finish included: ErrImportUnfinished), and tells its
// layout.
func checkStream(st jetstream.Stream, c Config) (layout, error) {
	info := st.CachedInfo()
	subjects := info.Config.Subjects
	if _, ok := info.Config.Metadata[importMark]; ok {
		return 0, fmt.Errorf("natslog: stream %s: %w", c.Stream, ErrImportUnfinished)
	}
	switch {
	case info.Config.Storage != jetstream.FileStorage:
		return 0, fmt.Errorf("natslog: stream %s does not use file storage", c.Stream)
	case len(subjects) == 1 && subjects[0] == c.Subject():
		return layoutGroup, nil
	case len(subjects) == 2 && subjects[0] == c.Subject() && subjects[1] == c.eventsWildcard():
		if !info.Config.AllowAtomicPublish {
			return 0, fmt.Errorf("natslog: stream %s does not allow atomic batch publish (allow_atomic; "+
				"nats-server 2.12 or later)", c.Stream)
		}
		return layoutBatch, nil
	}
	return 0, fmt.Errorf("natslog: stream %s has subjects %v, want %s and %s", c.Stream, subjects, c.Subject(),
		c.eventsWildcard())
}

// ConnectOptions are how a crewd reaches NATS, as NATS users expect.
type ConnectOptions struct {
	Name  string      // client name shown by the server
	Creds string      // a .creds file (JWT + nkey seed), optional
	TLS   *tls.Config // optional; nats:// URLs upgrade when the server asks
}

// Connect connects to URLs (comma-separated) and reconnects forever. Its error never holds a URL's userinfo
// (connectError).
func Connect(urls string, o ConnectOptions) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(o.Name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}
	if o.Creds != "" {
		opts = append(opts, nats.UserCredentials(o.Creds))
	}
	if o.TLS != nil {
		opts = append(opts, nats.Secure(o.TLS))
	}
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		return nil, connectError(urls, err)
	}
	return nc, nil
}
