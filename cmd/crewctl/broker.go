package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/cmd/crewd/daemon"
)

// Broker is what crewctl needs from a connection to crewd: calls and a
// live event stream. The real one is broker/client; tests use a fake.
type Broker interface {
	Call(ctx context.Context, method string, params any, result any) error
	// Subscribe streams the run's events after sinceSeq (a stream
	// version), of the given types (none: all), replaying then following.
	Subscribe(ctx context.Context, runID string, sinceSeq uint64, types []string) (Stream, error)
	Close() error
}

// Stream is a live tail of one run's events, in seq order, each once.
type Stream interface {
	Next(ctx context.Context) (json.RawMessage, error)
	Close() error
}

// dialer connects to the daemon with the admin token.
type dialer func(ctx context.Context, socket, token string) (Broker, error)

// maxTokenFile bounds what readToken reads of a token file: a token and the whitespace about it, which a file longer
// than that cannot be.
const maxTokenFile = 4096

// readToken reads the admin token file as crewd reads its admin.token (daemon.SecretFileFault, daemon.ParseToken);
// the token itself is never printed. NB: a file group or others may access is refused, its token may have leaked
// (crewd refuses to start on one, and one made so since it started is no safer); a symlink, which could point
// anywhere, and a file that is not a regular one (a FIFO's open would wait for a writer for good) are refused before
// it is opened, and what was opened is checked again; and a file that is not one token is refused naming it, where
// crewd would answer a hello that names no file.
func readToken(path string) (string, error) {
	f, st, fault, err := daemon.OpenSecret(path)
	if err != nil {
		return "", fmt.Errorf("crewctl: admin token: %w", err)
	}
	if fault != daemon.SecretFileFit {
		return "", tokenFileFault(path, fault, st)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("crewctl: admin token: %w", err)
	}
	if len(b) > maxTokenFile {
		return "", fmt.Errorf("crewctl: admin token file %s is longer than a token file (%d bytes at most)", path,
			maxTokenFile)
	}
	tok, ok := daemon.ParseToken(b)
	switch {
	case tok == "":
		return "", fmt.Errorf("crewctl: admin token file %s is empty", path)
	case !ok:
		return "", fmt.Errorf("crewctl: admin token file %s must hold one token of 1..%d bytes", path, daemon.MaxTokenLen)
	}
	return tok, nil
}

// tokenFileFault says why the admin token file at path may not hold the token: fault, which OpenSecret found on st.
func tokenFileFault(path string, fault daemon.SecretFault, st os.FileInfo) error {
	switch fault {
	case daemon.SecretFileSymlink:
		return fmt.Errorf("crewctl: admin token file %s is a symlink; it must be a regular file", path)
	case daemon.SecretFileIrregular:
		if st.IsDir() {
			return fmt.Errorf("crewctl: admin token file %s is a directory", path)
		}
		return fmt.Errorf("crewctl: admin token file %s is not a regular file", path)
	case daemon.SecretFileShared:
		return fmt.Errorf("crewctl: admin token file %s has mode %04o: group or others may access it, so the token "+
			"may have leaked; chmod 600 it if you are sure it has not, else remove crewd's admin.token and restart crewd "+
			"to have a new one made", path, st.Mode().Perm())
	}
	return nil
}

// crewdUID is the uid crewd must run as: crewctl's own, since only crewd's uid can read the admin token (and crewd
// refuses a root peer like any other uid outside its socket group).
var crewdUID = os.Geteuid

// dialBroker is the real dialer: broker/client with the admin hello, sent only to a crewd of crewdUID. The default
// socket directory may be in the shared temp directory, where another user can make it first and listen at its
// path: the admin token must not reach that user.
func dialBroker(ctx context.Context, socket, token string) (Broker, error) {
	want := crewdUID()
	opts := &client.Options{CheckBroker: func(uid int) error {
		if uid != want {
			return fmt.Errorf("it runs as uid %d, not %d: not sending it the admin token", uid, want)
		}
		return nil
	}}
	c, err := client.Dial(ctx, socket, client.Hello{Role: "admin", Token: token}, opts)
	if err != nil {
		return nil, err
	}
	return &realBroker{c: c}, nil
}

type realBroker struct{ c *client.Client }

func (b *realBroker) Call(ctx context.Context, method string, params any, result any) error {
	return b.c.Call(ctx, method, params, result)
}

func (b *realBroker) Close() error { return b.c.Close() }

// Subscribe uses events.subscribe through client.Subscribe, naming the run
// (the admin credential is scoped to none); the client resumes by itself
// after a resync frame.
func (b *realBroker) Subscribe(ctx context.Context, runID string, sinceSeq uint64, types []string) (Stream, error) {
	sub, err := b.c.Subscribe(ctx, sinceSeq, types, client.WithRun(runID))
	if err != nil {
		return nil, err
	}
	return &realStream{sub: sub}, nil
}

type realStream struct{ sub *client.Subscription }

func (s *realStream) Next(ctx context.Context) (json.RawMessage, error) {
	ev, err := s.sub.Next(ctx)
	return ev.Data, err
}

func (s *realStream) Close() error { return s.sub.Close() }

// sincePage is the answer of events.since.
type sincePage struct {
	Events  []json.RawMessage `json:"events"`
	NextSeq uint64            `json:"nextSeq"`
	HasMore bool              `json:"hasMore"`
}

// typeIn reports whether the event raw, as the broker encodes it, is of one of types (none: every type). NB: by the
// type the log stored, as events.subscribe's types match: an imported event is shown with its source's type, and
// metadata.imported holds the stored one (foreign.imported), so that the events read before a follow and those it
// is pushed are chosen alike.
func typeIn(raw json.RawMessage, types []string) bool {
	if len(types) == 0 {
		return true
	}
	var te teamEvent
	_ = json.Unmarshal(raw, &te)
	return slices.Contains(types, te.storedType())
}

// isWireError reports whether the broker answered err (an error frame), as
// opposed to a local or connection failure.
func isWireError(err error) bool {
	var we *wire.Error
	return errors.As(err, &we)
}

// daemonReadFailed reports whether the broker answered err with replay-failed:
// crewd could not read its log.
func daemonReadFailed(err error) bool { return wire.CodeOf(err) == wire.CodeReplayFailed }

// brokerErr is what a broker call's error exits with: a refusal by the broker is a problem (1); replay-failed, crewd
// unable to read its log (a finished run it cannot read back), and a lost connection are failures to reach the store
// (3): nothing was compared or shown, which is no problem found (exit 1 from replay --diff means differences).
func brokerErr(what string, err error) error {
	if isWireError(err) && !daemonReadFailed(err) {
		return problemf("%s: %v", what, err)
	}
	return openErr(fmt.Errorf("crewctl: %s: %w", what, err))
}
