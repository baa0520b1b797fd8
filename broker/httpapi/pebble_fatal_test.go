package httpapi

import (
	"context"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// fatalChildEnv names, in the test binary run as a child process, where the child meets a Pebble fatal error.
const fatalChildEnv = "CREWLOG_HTTPAPI_PEBBLE_FATAL"

// A Pebble fatal error met in a handler (a cold run read back from the log) or in the stream hub's read of the log
// stops the process (status 2, the panic printed), for crewd's supervisor to restart it, where the handler answered
// 500 and the hub ended the streams, and crewd went on with a store that answers nothing more. Each case runs in a
// child process, which the panic ends.
func TestAPebbleFatalInTheServerStopsTheProcess(t *testing.T) {
	if where := os.Getenv(fatalChildEnv); where != "" {
		meetAPebbleFatal(t, where)
		return
	}
	for _, where := range []string{"handler", "hub"} {
		t.Run(where, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a guard against a hang
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestAPebbleFatalInTheServerStopsTheProcess$",
				"-test.count=1")
			cmd.Env = append(os.Environ(), fatalChildEnv+"="+where)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "the process went on after the fatal error; its output:\n%s", out)
			require.Equal(t, 2, exit.ExitCode(), "%s", out)
			require.Contains(t, string(out), "panic: eventlog: pebble fatal: MANIFEST write failed")
		})
	}
}

// meetAPebbleFatal is the child's part: it serves, meets the fatal error where says, and returns only if the
// process went on after it (a minute later, for the hub, which answers no one).
func meetAPebbleFatal(t *testing.T, where string) {
	fatal := &eventlog.FatalError{Msg: "MANIFEST write failed", Err: syscall.ENOSPC}
	switch where {
	case "handler":
		f := newFixture(t, Options{UI: fatalFS{fatal}})
		resp, err := http.Get(f.web.URL + "/")
		require.NoError(t, err)
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
		resp.Body.Close()
	case "hub":
		f := newFixture(t, Options{})
		h := &f.srv.streams.hub
		h.pulling.Store(new(func() { panic(fatal) }))
		usage(f, 99)
		recv(t, h.stopped, "stop of the hub after the fatal error")
		<-time.After(time.Minute) // NB: the process ends long before, on the hub's goroutine, once it has stopped
	}
}

// fatalFS is a UI whose every file opened panics with a Pebble fatal error, as a handler's read of the log would.
type fatalFS struct{ fatal *eventlog.FatalError }

func (f fatalFS) Open(string) (fs.File, error) { panic(f.fatal) }
