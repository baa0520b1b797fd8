package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
)

// issuerEntries is a copy of the issuer cache's runs.
func issuerEntries(f *fixture) map[string]*runIssuers {
	f.srv.issuers.mu.Lock()
	defer f.srv.issuers.mu.Unlock()
	return maps.Clone(f.srv.issuers.runs)
}

// credentialsRequest is a GET of run's credentials with tok, its client's context ctx.
func credentialsRequest(ctx context.Context, run, tok string) *http.Request {
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/api/v1/runs/"+run+"/credentials", nil)
	req.Host = "127.0.0.1"
	req.Header.Set("Authorization", "Bearer "+tok)
	return req
}

// TestIssuerCacheForgetsOnlyTheLeastRecentlyReadRun: a reader going through one run more than the cache keeps
// costs the cache one run, the least recently read, not every run: the others' actors are kept, so reading them
// again scans nothing. (The cache once forgot every run when full, so a reader cycling through maxIssuerRuns + 1
// runs made each of its requests, and every other reader's, a scan of a whole stream.)
func TestIssuerCacheForgetsOnlyTheLeastRecentlyReadRun(t *testing.T) {
	f := newFixture(t, Options{})
	runs := make([]string, maxIssuerRuns+1)
	for i := range runs {
		runs[i] = fmt.Sprintf("team_20261001100000_%016x", i)
		f.do(audittest.Admin, &commands.RunCreate{RunID: runs[i], Team: "t", Goal: "g", Cwd: "/srv"})
	}
	read := func(run string) {
		t.Helper()
		f.ok("/api/v1/runs/" + run + "/credentials")
	}
	for _, run := range runs[:maxIssuerRuns] {
		read(run)
	}
	read(runs[0]) // runs[1] is now the least recently read
	full := issuerEntries(f)
	require.Len(t, full, maxIssuerRuns)

	read(runs[maxIssuerRuns])
	got := issuerEntries(f)
	require.Len(t, got, maxIssuerRuns, "one run took the place of one")
	require.Contains(t, got, runs[maxIssuerRuns])
	require.NotContains(t, got, runs[1], "the least recently read run is forgotten")
	for run, ri := range full {
		if run != runs[1] {
			require.Same(t, ri, got[run], "run %s was forgotten with the least recently read", run)
		}
	}

	// Reading the kept runs again keeps every entry: none is read from the stream's start again.
	for _, run := range runs {
		if run != runs[1] {
			read(run)
		}
	}
	again := issuerEntries(f)
	for run, ri := range got {
		require.Same(t, ri, again[run], "run %s was forgotten while every run read was kept", run)
	}
}

// TestCredentialsScanEndsWithItsRequest: a client that goes before its request has read the run's stream stops the
// scan within issuerCheckEvery events, or its wait for another request's scan of the run, and is answered nothing
// (its going is no failure). (The scan once went on to the end of the stream, up to the run's events quota, for a
// client long gone, and a request waiting for it waited as long, whether or not its client stayed.)
func TestCredentialsScanEndsWithItsRequest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		other bool // another request is scanning the run
	}{
		{"its own scan", false},
		{"another request's scan", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			for i := range 2 * issuerCheckEvery {
				usage(f, int64(i+1))
			}
			if tc.other {
				ri := f.srv.issuers.entry(liveRun)
				ri.scanning <- struct{}{} // the scan in progress, held by the test
				defer func() { <-ri.scanning }()
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			f.srv.reading = func(principal) { cancel() } // the client goes once its request has its read turn
			rec := httptest.NewRecorder()
			f.srv.Handler().ServeHTTP(rec, credentialsRequest(ctx, liveRun, roToken))
			require.Empty(t, rec.Body.String(), "a client that went is answered nothing")

			ri := issuerEntries(f)[liveRun]
			require.NotNil(t, ri)
			require.Less(t, ri.next-1, uint64(issuerCheckEvery), "the scan went on after its client went")
		})
	}
}

// TestCredentialsScanLongerThanAnEventsPageIsARebuild: a scan of more events than a read turn pays for (an events
// page's worth; fewer here) is a rebuild of its principal, as state?at's fold of the same run is: it waits for the
// one rebuild slot, counts against the principal's rebuilds, and beyond them is refused 429 too-many-rebuilds with a
// Retry-After. A run already read needs no turn. (The scan once ran in the request's read turn whatever its length:
// four requests of one reader were four whole-stream scans at once, beside the one rebuild at a time.)
func TestCredentialsScanLongerThanAnEventsPageIsARebuild(t *testing.T) {
	f := newFixture(t, Options{})
	f.srv.issuers.scanInTurn = 8 // liveRun and audittest.RunUnlimited have more events
	ro := keyReadOnlyPrefix + digestOf(roToken)

	slotDone, err := f.srv.states.slot.Take(t.Context(), "") // the rebuild in progress, held by the test
	require.NoError(t, err)
	answered := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		rec := httptest.NewRecorder()
		f.srv.Handler().ServeHTTP(rec, credentialsRequest(t.Context(), liveRun, roToken))
		answered <- rec
	}()
	awaitTurns(t, f.srv.states.rebuilds, ro, 1, 0)
	require.Empty(t, answered, "the scan did not wait for the rebuild in progress")
	slotDone()
	rec := <-answered
	require.Equal(t, http.StatusOK, rec.Code, "body %q", rec.Body)
	var body struct{ Credentials []credentialItem }
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.Len(t, body.Credentials, len(liveTasks))
	for _, c := range body.Credentials {
		require.NotEmpty(t, c.IssuedBy, "%+v", c)
	}
	awaitTurns(t, f.srv.states.rebuilds, ro, 0, 0)

	for range maxRebuildsPerPrincipal {
		done, ok := f.srv.states.rebuilds.TryTake(ro)
		require.True(t, ok)
		defer done()
	}
	rec = httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, credentialsRequest(t.Context(), audittest.RunUnlimited, roToken))
	require.Equal(t, http.StatusTooManyRequests, rec.Code, "body %q", rec.Body)
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
	var refusal errorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &refusal))
	require.Equal(t, codeTooManyRebuilds, refusal.Error.Code)

	rec = httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, credentialsRequest(t.Context(), liveRun, roToken))
	require.Equal(t, http.StatusOK, rec.Code, "a run already read costs no rebuild: body %q", rec.Body)
}
