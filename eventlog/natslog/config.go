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
	// its groups go to subject crewlog.<Stream>.groups.
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
	return errors.Join(errs...)
}

func (c Config) publishTimeout() time.Duration {
	if c.PublishTimeout == 0 {
		return 10 * time.Second
	}
	return c.PublishTimeout
}

// Subject is where the stream's groups are published.
func (c Config) Subject() string { return "crewlog." + c.Stream + ".groups" }

// CommandSubject is where followers forward commands to the writer.
func (c Config) CommandSubject() string { return "crewlog." + c.Stream + ".commands" }

// leaseBucket is the KV bucket of the writer lease.
func (c Config) leaseBucket() string { return "crewlog_" + c.Stream + "_writer" }

// EnsureStream creates the stream if it does not exist and checks that an
// existing one is fit to be a crewlog log.
//
// NB: messages are never removed (no limits, deletes and purges denied):
// the stream is the log, and crewlog keeps its own outcome table forever,
// so JetStream's duplicate window plays no part.
func EnsureStream(ctx context.Context, js jetstream.JetStream, c Config) (jetstream.Stream, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Existing {
		st, err := js.Stream(ctx, c.Stream)
		if err != nil {
			return nil, fmt.Errorf("natslog: stream %s: %w", c.Stream, err)
		}
		return st, checkStream(st, c)
	}
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: c.Stream, Subjects: []string{c.Subject()}, Storage: jetstream.FileStorage, Replicas: c.Replicas,
		Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardNew, DenyDelete: true, DenyPurge: true,
		AllowDirect: true, Description: "crewlog event log: one message per committed group",
	})
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		st, err = js.Stream(ctx, c.Stream)
	}
	if err != nil {
		return nil, fmt.Errorf("natslog: stream %s: %w", c.Stream, err)
	}
	return st, checkStream(st, c)
}

// checkStream refuses a stream that is not fit to be a crewlog log.
func checkStream(st jetstream.Stream, c Config) error {
	info := st.CachedInfo()
	switch {
	case info.Config.Storage != jetstream.FileStorage:
		return fmt.Errorf("natslog: stream %s does not use file storage", c.Stream)
	case len(info.Config.Subjects) != 1 || info.Config.Subjects[0] != c.Subject():
		return fmt.Errorf("natslog: stream %s has subjects %v, want only %s", c.Stream, info.Config.Subjects, c.Subject())
	}
	return nil
}

// ConnectOptions are how a crewd reaches NATS, as NATS users expect.
type ConnectOptions struct {
	Name  string      // client name shown by the server
	Creds string      // a .creds file (JWT + nkey seed), optional
	TLS   *tls.Config // optional; nats:// URLs upgrade when the server asks
}

// Connect connects to URLs (comma-separated) and reconnects forever.
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
		return nil, fmt.Errorf("natslog: connect: %w", err)
	}
	return nc, nil
}
