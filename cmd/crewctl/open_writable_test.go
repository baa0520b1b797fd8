package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/eventlog"
)

// TestWritingOpenOnAFullDiskIsHeardAndGivenUp: an offline command that opens the store to write (backup, migrate,
// import) on a disk where no table can be written (full) meets Pebble's open, which flushes what it replays from the
// WAL and retries that flush at once and without end. crewctl says why on stderr and gives the open up at Ctrl-C
// (its context ending), where it spun, silent, deaf to Ctrl-C, for as long as the disk stayed full.
func TestWritingOpenOnAFullDiskIsHeardAndGivenUp(t *testing.T) {
	data := t.TempDir()
	audittest.Scenario(t, filepath.Join(data, storeDir)) // NB: closed with its last appends in the WAL alone

	full := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".sst") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return errorfs.ErrInjected
		}
		return nil
	})
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var out bytes.Buffer
	errb := &onText{text: errorfs.ErrInjected.Error(), do: func() { cancel(errors.New("interrupt")) }} // Ctrl-C, read
	a := &app{io: stdio{out: &out, err: errb}, dial: func(context.Context, string, string) (Broker, error) {
		return nil, errors.New("no crewd")
	}, storeOpts: &eventlog.Options{FS: errorfs.Wrap(vfs.Default, full)}}
	dest := filepath.Join(t.TempDir(), "b")
	ran := make(chan int, 1)
	go func() { ran <- a.run(ctx, []string{"backup", dest, "--data", data}) }()
	var code int
	select {
	case code = <-ran:
	case <-time.After(time.Minute): // a guard against the hang this test is about, not a timing
		t.Fatalf("backup neither failed nor gave its open up a minute after the storage engine's error; stderr: %s",
			errb.String())
	}
	require.Equal(t, exitOpen, code, "stderr: %s\nstdout: %s", errb.String(), out.String())
	require.Contains(t, errb.String(), errorfs.ErrInjected.Error(), "the storage engine's error is shown")
	require.Contains(t, errb.String(), "given up (interrupt)")
	require.NoDirExists(t, dest, "nothing left behind")
}

// onText is a writer that keeps what it is written and calls do once text is in it. NB: no lock of its own: as
// crewctl's stderr, it is written by one goroutine at a time (openWritable's quietable holds its own around the
// storage engine's lines), and read once the command has returned.
type onText struct {
	text string
	do   func()
	b    bytes.Buffer
	done bool
}

func (o *onText) Write(p []byte) (int, error) {
	o.b.Write(p)
	if !o.done && strings.Contains(o.b.String(), o.text) {
		o.done = true
		o.do()
	}
	return len(p), nil
}

func (o *onText) String() string { return o.b.String() }
