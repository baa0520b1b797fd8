package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseCPUTimes(t *testing.T) {
	for _, tc := range []struct {
		name string
		line string
		want cpuTimes
		ok   bool
	}{
		{"with guest columns", "cpu  4702965 2449 664348 8549136 152664 0 50073 430021 0 0",
			cpuTimes{busy: 4702965 + 2449 + 664348 + 50073, iowait: 152664, steal: 430021, idle: 8549136}, true},
		{"steal, no guest", "cpu 10 20 30 40 50 60 70 80",
			cpuTimes{busy: 10 + 20 + 30 + 60 + 70, iowait: 50, steal: 80, idle: 40}, true},
		{"no steal column", "cpu 10 20 30 40 50 60 70", cpuTimes{}, false},
		{"a single CPU's line", "cpu0 10 20 30 40 50 60 70 80", cpuTimes{}, false},
		{"not a number", "cpu 10 20 x 40 50 60 70 80", cpuTimes{}, false},
		{"negative", "cpu 10 20 -30 40 50 60 70 80", cpuTimes{}, false},
		{"empty", "", cpuTimes{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseCPUTimes(tc.line)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestHostCPUBetween(t *testing.T) {
	a := cpuTimes{busy: 1000, iowait: 100, steal: 50, idle: 5000}
	h := hostCPUBetween(a, true, cpuTimes{busy: 1600, iowait: 200, steal: 250, idle: 5100}, true)
	require.NotNil(t, h)
	require.InDelta(t, 0.6, h.Busy, 1e-9)
	require.InDelta(t, 0.1, h.IOWait, 1e-9)
	require.InDelta(t, 0.2, h.Steal, 1e-9)
	require.InDelta(t, 0.1, h.Idle, 1e-9)
	require.Equal(t, "host CPU: busy 60 %, iowait 10 %, steal 20 %, idle 10 %", h.String())

	// iowait may move into idle and decrease (proc(5)): their sum is what is trusted.
	h = hostCPUBetween(a, true, cpuTimes{busy: 1500, iowait: 40, steal: 50, idle: 5560}, true)
	require.NotNil(t, h)
	require.InDelta(t, 0.5, h.Busy, 1e-9)
	require.Zero(t, h.IOWait)
	require.InDelta(t, 0.5, h.Idle, 1e-9)

	for name, b := range map[string]cpuTimes{
		"no time passed":      a,
		"busy went backwards": {busy: 999, iowait: 100, steal: 60, idle: 5100},
		"steal backwards":     {busy: 1100, iowait: 100, steal: 49, idle: 5100},
		"idle backwards":      {busy: 1100, iowait: 100, steal: 50, idle: 4000},
	} {
		require.Nil(t, hostCPUBetween(a, true, b, true), name)
	}
	require.Nil(t, hostCPUBetween(a, false, a, true), "a missing reading")
	require.Nil(t, hostCPUBetween(a, true, a, false), "a missing reading")
}

// Every timed cell reports the machine's CPU over it where the kernel's counters can be read, on its progress and in
// the table's last column.
func TestCellsReportTheHostCPU(t *testing.T) {
	if _, ok := readCPUTimes(); !ok {
		t.Skip("no /proc/stat here")
	}
	o := CompareOptions{Duration: 200 * time.Millisecond, Clients: []int{2}, Rounds: 1, Dir: t.TempDir(),
		Only: []string{"pebble", "crewlog"}, SyncCount: inProcess{}}
	var progress bytes.Buffer
	o.Progress = &progress
	cmp, err := Compare(context.Background(), o)
	require.NoError(t, err, progress.String())
	for _, r := range cmp.Rounds[0] {
		require.NoError(t, r.Err, "%s %s", r.Impl, r.Cell)
		require.NotNil(t, r.Host, "%s %s", r.Impl, r.Cell)
		sum := r.Host.Busy + r.Host.IOWait + r.Host.Steal + r.Host.Idle
		require.InDelta(t, 1, sum, 1e-9)
		require.Positive(t, r.Host.Busy, "%s %s: the cell itself kept the machine busy", r.Impl, r.Cell)
	}
	require.Contains(t, progress.String(), "host CPU: busy ")
	var md bytes.Buffer
	require.NoError(t, cmp.WriteMarkdown(&md))
	rows := 0
	for _, line := range strings.Split(md.String(), "\n") {
		if strings.HasPrefix(line, "| 2 | ") {
			rows++
			cols := strings.Split(strings.Trim(line, "|"), "|")
			require.Len(t, cols, 11, line)
			require.Regexp(t, `^ \d+ / \d+ % $`, cols[10], line)
		}
	}
	require.Equal(t, 4, rows, md.String())
}
