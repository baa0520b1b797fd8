package eventlog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPebbleErrorsRateLimited: an error Pebble repeats (a flush retried on a full disk) is logged once per
// 10 s (doc.go's number, so the clock moves by it, not by errorLogInterval) with the count left out, not once per
// retry; another kind of error is not held back by it.
func TestPebbleErrorsRateLimited(t *testing.T) {
	var buf bytes.Buffer
	p := newPebbleLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	now := time.Unix(0, 0)
	p.now = func() time.Time { return now }

	for range 1000 {
		p.Errorf("background error: %s", "no space left on device")
	}
	p.Errorf("other: %d", 1)
	require.Equal(t, 2, strings.Count(buf.String(), "\n"), buf.String())

	now = time.Unix(0, 0).Add(10*time.Second - time.Nanosecond)
	p.Errorf("background error: %s", "no space left on device")
	require.Equal(t, 2, strings.Count(buf.String(), "\n"), "logged again before 10 s: %s", buf.String())

	now = time.Unix(0, 0).Add(10 * time.Second)
	p.Errorf("background error: %s", "no space left on device")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3, "not logged again once 10 s passed")
	require.Contains(t, lines[2], "suppressed=1000")
}
