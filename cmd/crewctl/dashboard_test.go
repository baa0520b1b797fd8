package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker"
)

// crewctl dashboard prints the link crewd mints through its socket, in text and JSON; against a crewd that serves
// no dashboard it fails saying so.
func TestDashboardPrintsALoginLink(t *testing.T) {
	exp := time.Date(2026, 12, 5, 12, 10, 0, 0, time.UTC)
	var serving atomic.Bool
	serving.Store(true)
	data, socket := liveDaemonWith(t, broker.Options{DashboardLogin: func() (string, time.Time, bool) {
		return "http://127.0.0.1:7717/login?code=c0de", exp, serving.Load()
	}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dashboard := func(extra ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := runWith(ctx, append([]string{"dashboard", "--data", data, "--socket", socket}, extra...),
			stdio{out: &out, err: &errb})
		return code, out.String(), errb.String()
	}

	code, out, errs := dashboard()
	require.Equal(t, exitOK, code, errs)
	require.Equal(t, "http://127.0.0.1:7717/login?code=c0de\n  works once, until 2026-12-05T12:10:00Z\n", out)
	code, out, errs = dashboard("--json")
	require.Equal(t, exitOK, code, errs)
	var link dashboardLink
	require.NoError(t, json.Unmarshal([]byte(out), &link))
	require.Equal(t, dashboardLink{URL: "http://127.0.0.1:7717/login?code=c0de", ExpiresAt: exp.UnixMilli()}, link)

	serving.Store(false)
	code, out, errs = dashboard()
	require.NotEqual(t, exitOK, code)
	require.Empty(t, out)
	require.Contains(t, errs, "serves no dashboard")
}

// TestOverviewNamesEveryCommand: crewctl --help sorts the commands by what they need (the store, crewd, the data
// directory); each one is named there, so a new command does not go without the line saying whether crewd must run.
func TestOverviewNamesEveryCommand(t *testing.T) {
	root := (&app{}).root()
	for _, c := range root.Commands() {
		named := `[ ,]` + regexp.QuoteMeta(c.Name()) + `[ ,\n]`
		require.Regexp(t, named, root.Long, "crewctl --help's overview names %s", c.Name())
	}
}
