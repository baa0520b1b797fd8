package httpapi

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// issuerEntries is a copy of the issuer cache's runs.
func issuerEntries(f *fixture) map[string]*runIssuers {
	f.srv.issuers.mu.Lock()
	defer f.srv.issuers.mu.Unlock()
	return maps.Clone(f.srv.issuers.runs)
}

// issuerSections lists the runs of the issuer cache's trial and main sections, the most recently read first.
func issuerSections(f *fixture) (trial, main []string) {
	f.srv.issuers.mu.Lock()
	defer f.srv.issuers.mu.Unlock()
	for e := f.srv.issuers.trial.Front(); e != nil; e = e.Next() {
		trial = append(trial, e.Value.(*runIssuers).run)
	}
	for e := f.srv.issuers.main.Front(); e != nil; e = e.Next() {
		main = append(main, e.Value.(*runIssuers).run)
	}
	return trial, main
}

// issuerGhosts lists the issuer cache's ghosts, the most recent first.
func issuerGhosts(f *fixture) (ghosts []string) {
	f.srv.issuers.mu.Lock()
	defer f.srv.issuers.mu.Unlock()
	for e := f.srv.issuers.ghosts.Front(); e != nil; e = e.Next() {
		ghosts = append(ghosts, e.Value.(string))
	}
	return ghosts
}

// issuerOwners is the owner of each run in the issuer cache's main section.
func issuerOwners(f *fixture) map[string]string {
	f.srv.issuers.mu.Lock()
	defer f.srv.issuers.mu.Unlock()
	owners := make(map[string]string)
	for e := f.srv.issuers.main.Front(); e != nil; e = e.Next() {
		owners[e.Value.(*runIssuers).run] = e.Value.(*runIssuers).owner
	}
	return owners
}

// requireIssuerCacheConsistent requires the issuer cache's bookkeeping to agree with its sections, as its bounds
// rest on it: each section and the ghosts within their bounds; every run in a section in runs, in the section its
// entry says; owned exactly the count of main's runs per owner, none at zero (a reader with none there has no
// entry), none beyond the share; no ghost in a section; and an entry in no section only while a request uses it.
func requireIssuerCacheConsistent(t testing.TB, f *fixture) {
	t.Helper()
	c := &f.srv.issuers
	c.mu.Lock()
	defer c.mu.Unlock()
	require.LessOrEqual(t, c.trial.Len(), maxIssuerTrialRuns)
	require.LessOrEqual(t, c.main.Len(), maxIssuerRuns-maxIssuerTrialRuns)
	placed := make(map[*runIssuers]bool)
	counts := make(map[string]int)
	for _, section := range []*list.List{&c.trial, &c.main} {
		for e := section.Front(); e != nil; e = e.Next() {
			ri := e.Value.(*runIssuers)
			require.Same(t, e, ri.elem, "run %s", ri.run)
			require.Equal(t, section == &c.main, ri.inMain, "run %s", ri.run)
			require.False(t, ri.forgotten, "run %s", ri.run)
			require.Same(t, ri, c.runs[ri.run], "run %s", ri.run)
			if ri.inMain {
				require.NotEmpty(t, ri.owner, "run %s", ri.run)
				counts[ri.owner]++
			}
			placed[ri] = true
		}
	}
	require.Equal(t, counts, c.owned, "owned is not main's runs per owner")
	for owner, n := range c.owned {
		require.LessOrEqual(t, n, maxIssuerRunsPerReader, "owner %s", owner)
	}
	for run, ri := range c.runs {
		require.Equal(t, run, ri.run)
		if !placed[ri] {
			require.Nil(t, ri.elem, "run %s", run)
			require.Positive(t, ri.users, "run %s takes no place and no request uses it", run)
		}
	}
	require.LessOrEqual(t, c.ghosts.Len(), maxIssuerGhosts)
	require.Len(t, c.ghostsOf, c.ghosts.Len())
	for e := c.ghosts.Front(); e != nil; e = e.Next() {
		run := e.Value.(string)
		require.Same(t, e, c.ghostsOf[run], "ghost %s", run)
		require.False(t, placed[c.runs[run]], "ghost %s is in a section", run)
	}
}

// credentialsRequest is a GET of run's credentials with tok, its client's context ctx.
func credentialsRequest(ctx context.Context, run, tok string) *http.Request {
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/api/v1/runs/"+run+"/credentials", nil)
	req.Host = "127.0.0.1"
	req.Header.Set("Authorization", "Bearer "+tok)
	return req
}

// readCredentials reads run's credentials with tok, requires an answer, and the issuer cache consistent after it.
func readCredentials(t testing.TB, f *fixture, tok, run string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, credentialsRequest(t.Context(), run, tok))
	require.Equal(t, http.StatusOK, rec.Code, "run %s: body %q", run, rec.Body)
	requireIssuerCacheConsistent(t, f)
	return rec
}

// newRuns creates n runs named after prefix, each of one event (its run.created).
func newRuns(f *fixture, prefix string, n int) []string {
	runs := make([]string, n)
	for i := range runs {
		runs[i] = fmt.Sprintf("team_20261001100000_%s%013x", prefix, i)
		f.do(audittest.Admin, &commands.RunCreate{RunID: runs[i], Team: "t", Goal: "g", Cwd: "/srv"})
	}
	return runs
}

// readerTokens are n read-only tokens the fixture accepts: n readers, each its own principal.
func readerTokens(f *fixture, n int) []string {
	toks := make([]string, n)
	for i := range toks {
		toks[i] = fmt.Sprintf("crro_reader-%d", i)
		f.tokens.set(toks[i], true)
	}
	return toks
}

// requireKept requires every run of want to be kept with the entry it had, never read from its stream's start
// again.
func requireKept(t testing.TB, want, got map[string]*runIssuers, runs []string, msg string) {
	t.Helper()
	for _, run := range runs {
		require.NotNil(t, want[run], "run %s", run)
		require.Same(t, want[run], got[run], "run %s was forgotten: %s", run, msg)
	}
}

// holdRebuilds takes every rebuild turn of tok's principal, as its requests in progress or waiting would, and
// returns the function that gives them back.
func holdRebuilds(t testing.TB, f *fixture, tok string) (giveBack func()) {
	t.Helper()
	var held []func()
	for range maxRebuildsPerPrincipal {
		done, ok := f.srv.states.rebuilds.TryTake(keyReadOnlyPrefix + digestOf(tok))
		require.True(t, ok)
		held = append(held, done)
	}
	return func() {
		for _, done := range held {
			done()
		}
	}
}

// TestIssuerCacheForgetsOnlyTheLeastRecentlyReadRun: each section, full, makes room for one run by forgetting one,
// its least recently read, never every run; a run read once enters the trial section and moves to the main section
// when read again. (The cache once forgot every run when full; then it was one LRU of every run, which a reader
// going through one run more than it kept emptied.)
func TestIssuerCacheForgetsOnlyTheLeastRecentlyReadRun(t *testing.T) {
	f := newFixture(t, Options{})
	const perReader = (maxIssuerRuns - maxIssuerTrialRuns) / 4 // 4 readers fill main, each within its share
	require.LessOrEqual(t, perReader, maxIssuerRunsPerReader)
	readers := readerTokens(f, 4)
	mainRuns := newRuns(f, "m", maxIssuerRuns-maxIssuerTrialRuns)
	trialRuns := newRuns(f, "t", maxIssuerTrialRuns+1)

	for i, run := range mainRuns {
		readCredentials(t, f, readers[i/perReader], run)
		trial, _ := issuerSections(f)
		require.True(t, len(trial) > 0 && trial[0] == run, "a run read once is on trial: %v", trial)
		readCredentials(t, f, readers[i/perReader], run)
	}
	trial, main := issuerSections(f)
	require.Empty(t, trial, "a run read again left the trial section")
	require.Len(t, main, maxIssuerRuns-maxIssuerTrialRuns)
	for _, run := range trialRuns[:maxIssuerTrialRuns] {
		readCredentials(t, f, readers[0], run)
	}
	readCredentials(t, f, readers[0], mainRuns[0]) // mainRuns[1] is now main's least recently read
	full := issuerEntries(f)
	require.Len(t, full, maxIssuerRuns)

	// The trial section, full, forgets its least recently read run for a new one.
	readCredentials(t, f, readers[0], trialRuns[maxIssuerTrialRuns])
	got := issuerEntries(f)
	require.Len(t, got, maxIssuerRuns, "one run took the place of one")
	require.Nil(t, got[trialRuns[0]], "the trial section's least recently read run is forgotten")
	require.Equal(t, []string{trialRuns[0]}, issuerGhosts(f), "the run that left trial is a ghost")
	requireKept(t, full, got, trialRuns[1:maxIssuerTrialRuns], "a run on trial went with the least recently read")
	requireKept(t, full, got, mainRuns, "a run new to the cache pushed one out of the main section")

	// The main section, full, forgets its least recently read run for one read again (by a reader with no run
	// there: the readers at their share make room with their own runs).
	readCredentials(t, f, adminToken, trialRuns[1])
	got = issuerEntries(f)
	require.Len(t, got, maxIssuerRuns-1, "a run moved from trial to main")
	_, main = issuerSections(f)
	require.Equal(t, trialRuns[1], main[0])
	require.Nil(t, got[mainRuns[1]], "the main section's least recently read run is forgotten")
	requireKept(t, full, got, append(mainRuns[:1:1], mainRuns[2:]...), "it went with the least recently read")
	requireKept(t, full, got, trialRuns[1:maxIssuerTrialRuns], "a run on trial went to make room in main")
}

// TestIssuerCacheKeepsRunsReadAgainWhileAReaderGoesThroughMore: one reader going through more runs than the cache
// keeps or remembers, once each or each twice in a row, never pushes out the runs another reader reads again and
// again, however seldom, while main has room: reading them scans nothing. (The cache was once one LRU of every run:
// a reader cycling through maxIssuerRuns + 1 runs missed each of them every time, and forgot every run that others
// read less often than once per maxIssuerRuns of its requests, each then a whole scan again, in the one rebuild
// slot for a long run.)
func TestIssuerCacheKeepsRunsReadAgainWhileAReaderGoesThroughMore(t *testing.T) {
	f := newFixture(t, Options{})
	hot := newRuns(f, "h", 8)
	// Each run of the round is read again after maxIssuerTrialRuns + maxIssuerGhosts runs new to the cache: it
	// left trial and is no ghost any more.
	cycled := newRuns(f, "c", maxIssuerTrialRuns+maxIssuerGhosts+1)
	require.Greater(t, len(cycled), maxIssuerRuns)
	for range 2 {
		for _, run := range hot {
			readCredentials(t, f, adminToken, run)
		}
	}
	kept := issuerEntries(f)

	for range 2 {
		for _, run := range cycled {
			readCredentials(t, f, roToken, run)
		}
		requireKept(t, kept, issuerEntries(f), hot, "a reader went through more runs than the cache keeps")
		for _, run := range hot {
			readCredentials(t, f, adminToken, run)
		}
	}
	_, main := issuerSections(f)
	require.ElementsMatch(t, hot, main, "runs read once each time round, no ghosts any more, stay on trial")
	require.Len(t, issuerGhosts(f), maxIssuerGhosts)

	// Each read twice in a row reaches main, within the reader's share: its own runs make room for its next.
	for _, run := range cycled {
		readCredentials(t, f, roToken, run)
		readCredentials(t, f, roToken, run)
	}
	requireKept(t, kept, issuerEntries(f), hot, "a reader read more runs twice than its share")
	_, main = issuerSections(f)
	require.Len(t, main, len(hot)+maxIssuerRunsPerReader)
	latest := slices.Clone(cycled[len(cycled)-maxIssuerRunsPerReader:])
	slices.Reverse(latest)
	require.Equal(t, latest, main[:maxIssuerRunsPerReader], "the reader's runs read last are its runs kept")
}

// TestIssuerCacheKeepsMainRunsTheirPromoters: a run in main stays the reader's whose read moved it there: another
// reader reading every run of a full main once moves each up, takes none over and pushes none out. (A run once
// counted against whoever read it last: one read of each of the runs four readers kept in main made them all the
// fifth's, which past its share forgot them, its own oldest each time, till main held its share alone.)
func TestIssuerCacheKeepsMainRunsTheirPromoters(t *testing.T) {
	f := newFixture(t, Options{})
	require.Equal(t, maxIssuerRuns-maxIssuerTrialRuns, 4*maxIssuerRunsPerReader, "4 readers fill main")
	readers := readerTokens(f, 5)
	mainRuns := newRuns(f, "m", maxIssuerRuns-maxIssuerTrialRuns)

	// The fifth reader's one run in main is main's least recently read when the others fill it: it makes room,
	// and that reader has no run left there.
	first := newRuns(f, "f", 1)[0]
	readCredentials(t, f, readers[4], first)
	readCredentials(t, f, readers[4], first)
	for i, run := range mainRuns {
		readCredentials(t, f, readers[i/maxIssuerRunsPerReader], run)
		readCredentials(t, f, readers[i/maxIssuerRunsPerReader], run)
	}
	require.Nil(t, issuerEntries(f)[first], "main's least recently read run made room")
	owners := issuerOwners(f)
	require.Len(t, owners, len(mainRuns))
	kept := issuerEntries(f)

	for _, run := range mainRuns {
		readCredentials(t, f, readers[4], run)
	}
	requireKept(t, kept, issuerEntries(f), mainRuns, "another reader read each run of main once")
	require.Equal(t, owners, issuerOwners(f), "another reader's read took a run over")
	trial, main := issuerSections(f)
	require.Empty(t, trial)
	readOrder := slices.Clone(mainRuns)
	slices.Reverse(readOrder)
	require.Equal(t, readOrder, main, "each read made its run main's most recently read")
}

// TestIssuerCacheMovesARunReadAgainAfterItLeftTrialToMain: a run read again after others' new runs pushed it out of
// trial, while a ghost, goes to main, the reader's that read it again, and from then on its reads scan nothing; a
// request whose client went after reading some of it moves it to trial only, as a run new to the cache. (A run went
// to main only if read again before maxIssuerTrialRuns other runs entered trial: a reader going through that many
// small runs between another's reads of a large run kept it on trial for good, each of its reads a whole scan, a
// rebuild.)
func TestIssuerCacheMovesARunReadAgainAfterItLeftTrialToMain(t *testing.T) {
	f := newFixture(t, Options{})
	for lastVersion(t, f, liveRun) <= issuerCheckEvery { // a leaving client's scan stops after its first batch
		usage(f, 1)
	}
	f.srv.issuers.scanInTurn = 8 // reading liveRun whole is a rebuild; reading a new run is not
	rebuilt := 0
	f.srv.states.holding = func() { rebuilt++ }
	readers := readerTokens(f, 2)
	const perRound = 2 * maxIssuerTrialRuns
	small := newRuns(f, "s", 4*perRound)
	goThrough := func(runs []string) {
		t.Helper()
		for _, run := range runs {
			readCredentials(t, f, readers[1], run)
		}
	}

	readCredentials(t, f, readers[0], liveRun)
	require.Equal(t, 1, rebuilt)
	goThrough(small[:perRound])
	require.Nil(t, issuerEntries(f)[liveRun], "the run left trial")
	require.Contains(t, issuerGhosts(f), liveRun)

	// The client goes at the scan's look at it after its first batch, in its read turn.
	f.srv.issuers.scanInTurn = 0
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	rec := httptest.NewRecorder()
	client := &leavingClient{Context: ctx, cancel: cancel, f: f, run: liveRun}
	f.srv.Handler().ServeHTTP(rec, credentialsRequest(client, liveRun, readers[0]))
	require.Empty(t, rec.Body.String(), "a client that went is answered nothing")
	requireIssuerCacheConsistent(t, f)
	trial, _ := issuerSections(f)
	require.Equal(t, liveRun, trial[0], "a request whose client went moved a ghost past trial")
	require.NotContains(t, issuerGhosts(f), liveRun)
	f.srv.issuers.scanInTurn = 8

	for round := 1; round < 4; round++ {
		goThrough(small[round*perRound : (round+1)*perRound])
		readCredentials(t, f, readers[0], liveRun)
	}
	require.Equal(t, 2, rebuilt, "the run was read whole again after the read that followed its leaving trial")
	_, main := issuerSections(f)
	require.Equal(t, liveRun, main[0])
	require.Equal(t, keyReadOnlyPrefix+digestOf(readers[0]), issuerOwners(f)[liveRun])
	require.NotContains(t, issuerGhosts(f), liveRun)
}

// TestIssuerCacheLeftAsItWasByRefusedAndCancelledRequests: a request refused its rebuild turn (429), or whose
// client went before it read anything, takes no place in the cache and moves no run in it, however many of them a
// reader sends. (A request once took its run's place before it waited for the run's scan or a rebuild turn: a
// reader holding its rebuild turns emptied the cache of fully read runs with maxIssuerRuns requests refused 429,
// or with as many whose client left at once.)
func TestIssuerCacheLeftAsItWasByRefusedAndCancelledRequests(t *testing.T) {
	f := newFixture(t, Options{})
	f.srv.issuers.scanInTurn = 1 // each run of others has 2 events: a scan of it needs a rebuild turn
	// gone are read once first, then pushed out of trial by the last maxIssuerTrialRuns of read: ghosts, which a
	// request for them must leave as they are too.
	gone := newRuns(f, "g", 4)
	for _, run := range gone {
		readCredentials(t, f, adminToken, run)
	}
	read := newRuns(f, "k", maxIssuerRunsPerReader+maxIssuerTrialRuns)
	for i, run := range read {
		readCredentials(t, f, adminToken, run)
		if i < maxIssuerRunsPerReader {
			readCredentials(t, f, adminToken, run)
		}
	}
	before := issuerEntries(f)
	require.Len(t, before, len(read))
	trial, main := issuerSections(f)
	ghosts := issuerGhosts(f)
	require.ElementsMatch(t, gone, ghosts)
	requireLeftAsItWas := func(msg string) {
		t.Helper()
		requireIssuerCacheConsistent(t, f)
		got := issuerEntries(f)
		require.Len(t, got, len(before), msg)
		requireKept(t, before, got, read, msg)
		gotTrial, gotMain := issuerSections(f)
		require.Equal(t, trial, gotTrial, msg)
		require.Equal(t, main, gotMain, msg)
		require.Equal(t, ghosts, issuerGhosts(f), msg)
	}

	others := append(newRuns(f, "o", maxIssuerRuns+1), gone...)
	for _, run := range others {
		f.do(audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "running"})
	}
	giveBack := holdRebuilds(t, f, roToken)
	for _, run := range others {
		rec := httptest.NewRecorder()
		f.srv.Handler().ServeHTTP(rec, credentialsRequest(t.Context(), run, roToken))
		require.Equal(t, http.StatusTooManyRequests, rec.Code, "body %q", rec.Body)
		requireIssuerCacheConsistent(t, f)
	}
	requireLeftAsItWas("requests refused their rebuild turn changed the cache")
	giveBack()

	for _, run := range others {
		ctx, cancel := context.WithCancel(t.Context())
		f.srv.reading = func(principal) { cancel() } // the client goes once its request has its read turn
		rec := httptest.NewRecorder()
		f.srv.Handler().ServeHTTP(rec, credentialsRequest(ctx, run, roToken))
		cancel()
		require.Empty(t, rec.Body.String(), "a client that went is answered nothing")
		requireIssuerCacheConsistent(t, f)
	}
	requireLeftAsItWas("requests whose client went at once changed the cache")
}

// leavingClient is a client's context that ends once its request's scan of run, new to the cache, has read
// something: at the scan's first look at it after its first batch of issuerCheckEvery events. NB: the test serves
// the request on its own goroutine, the one that reads the stream and calls Err, so Err reads next without a race.
type leavingClient struct {
	context.Context
	cancel context.CancelFunc
	f      *fixture
	run    string
}

func (c *leavingClient) Err() error {
	c.f.srv.issuers.mu.Lock()
	ri := c.f.srv.issuers.runs[c.run]
	c.f.srv.issuers.mu.Unlock()
	if ri != nil && ri.next > 1 {
		c.cancel()
	}
	return c.Context.Err()
}

// TestCredentialsScanEndsWithItsRequest: a client that goes while its request reads the run's stream stops the
// scan within issuerCheckEvery events, and is answered nothing (its going is no failure); what the scan read is
// kept, and the next request reads on from there, neither reading an event again nor skipping one. A client that
// goes while its request waits for another request's scan of the run stops the wait. (The scan once went on to the
// end of the stream, up to the run's events quota, for a client long gone, and a request waiting for it waited as
// long, whether or not its client stayed.)
func TestCredentialsScanEndsWithItsRequest(t *testing.T) {
	t.Run("its own scan", func(t *testing.T) {
		f := newFixture(t, Options{})
		// Version issuerCheckEvery, the first batch's last event, and the next revoke a credential each.
		for lastVersion(t, f, liveRun) < issuerCheckEvery-1 {
			usage(f, 1)
		}
		require.Equal(t, uint64(issuerCheckEvery-1), lastVersion(t, f, liveRun))
		f.do(audittest.Orchestrator, &commands.CredentialRevoke{RunID: liveRun, TaskID: "01_lead", Reason: "first"})
		require.Equal(t, uint64(issuerCheckEvery), lastVersion(t, f, liveRun))
		f.do(audittest.Admin, &commands.CredentialRevoke{RunID: liveRun, TaskID: "03_check", Reason: "second"})
		require.Equal(t, uint64(issuerCheckEvery+1), lastVersion(t, f, liveRun))
		for range issuerCheckEvery {
			usage(f, 1)
		}
		last := lastVersion(t, f, liveRun)
		// The next request reads the rest in its read turn, and could take no rebuild turn for more.
		f.srv.issuers.scanInTurn = last - issuerCheckEvery

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		rec := httptest.NewRecorder()
		client := &leavingClient{Context: ctx, cancel: cancel, f: f, run: liveRun}
		f.srv.Handler().ServeHTTP(rec, credentialsRequest(client, liveRun, roToken))
		require.Empty(t, rec.Body.String(), "a client that went is answered nothing")
		ri := issuerEntries(f)[liveRun]
		require.NotNil(t, ri, "what the scan read is kept")
		require.Equal(t, uint64(issuerCheckEvery+1), ri.next, "the scan did not stop after its first batch")

		defer holdRebuilds(t, f, roToken)()
		rec = readCredentials(t, f, roToken, liveRun)
		require.Same(t, ri, issuerEntries(f)[liveRun])
		require.Equal(t, last+1, ri.next)
		var body struct{ Credentials []credentialItem }
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		require.Len(t, body.Credentials, len(liveTasks))
		for _, c := range body.Credentials {
			require.Equal(t, "orchestrator", c.IssuedBy, "%+v", c)
		}
		require.Equal(t, "orchestrator", body.Credentials[0].RevokedBy, "%+v", body.Credentials[0])
		require.Equal(t, "first", body.Credentials[0].RevokedReason)
		require.False(t, body.Credentials[1].Revoked)
		require.Equal(t, "admin", body.Credentials[2].RevokedBy, "the next request skipped the first event it had to read")
		require.Equal(t, "second", body.Credentials[2].RevokedReason)
	})

	t.Run("another request's scan", func(t *testing.T) {
		f := newFixture(t, Options{})
		ri := f.srv.issuers.acquire(liveRun)
		ri.scanning <- struct{}{} // the scan in progress, held by the test
		defer func() {
			<-ri.scanning
			f.srv.issuers.release(ri, "", false, false)
		}()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		answered := make(chan *httptest.ResponseRecorder, 1)
		go func() {
			rec := httptest.NewRecorder()
			f.srv.Handler().ServeHTTP(rec, credentialsRequest(ctx, liveRun, roToken))
			answered <- rec
		}()
		require.Eventually(t, func() bool { // the request is at the entry, about to wait for its scan
			f.srv.issuers.mu.Lock()
			defer f.srv.issuers.mu.Unlock()
			return ri.users == 2
		}, time.Minute, time.Millisecond)
		cancel()
		select {
		case rec := <-answered:
			require.Empty(t, rec.Body.String(), "a client that went is answered nothing")
		case <-time.After(time.Minute): // a guard against a hang, not a timing
			t.Fatal("the request still waits for the other's scan a minute after its client went")
		}
		require.Equal(t, uint64(1), ri.next, "the request read the stream without the run's scan")
	})
}

// lastVersion is run's last stream version.
func lastVersion(t testing.TB, f *fixture, run string) uint64 {
	t.Helper()
	it := f.log.ReadStream(run, 1)
	defer it.Close()
	var v uint64
	for it.Next() {
		v = it.Event().StreamVersion
	}
	require.NoError(t, it.Close())
	return v
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

	defer holdRebuilds(t, f, roToken)()
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

// TestCredentialsScanOfImportedEventsIsARebuild: what a scan is charged for is what it reads, imported events
// (foreign.imported) too, which the run's usage does not count: a run of few events of its own and many imported
// ones is a rebuild to read. (The charge was once decided before the scan, from the run's usage: such a run's
// scan, however long, was never one.)
func TestCredentialsScanOfImportedEventsIsARebuild(t *testing.T) {
	f := newFixture(t, Options{})
	f.srv.issuers.scanInTurn = 8
	run := newRuns(f, "i", 1)[0]
	f.do(audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "running"})
	for i := range 2 {
		imported := make([]commands.ImportedEvent, commands.MaxImportEvents)
		for j := range imported {
			imported[j] = commands.ImportedEvent{Type: events.TypeForeignImported, TimeMs: 1000,
				Payload: &events.ForeignImported{Source: events.ForeignSourcePicrew, Type: "hook.executed",
					Seq: int64(i*len(imported) + j), Time: "2026-10-01T10:00:01.000Z", Message: "ok"}}
		}
		r, err := f.eng.Submit(t.Context(), commands.Request{Principal: events.EnginePrincipal(),
			CommandID: fmt.Sprintf("import-%d", i), Actor: audittest.Admin,
			Command: &commands.Import{Source: events.ForeignSourcePicrew, RunID: run, Events: imported}})
		require.NoError(t, err)
		require.Nil(t, r.Rejected, "%v", r.Rejected)
	}
	f.do(audittest.Orchestrator, &commands.TaskCreate{RunID: run, TaskID: "01_lead", Role: "executor",
		Agent: "executor", Title: "lead", Cwd: "/srv/lead", StepID: "01_lead"})
	r := f.do(audittest.Orchestrator, &commands.CredentialIssue{RunID: run, TaskID: "01_lead", Digest: digestOf("tok")})
	require.Nil(t, r.Rejected, "%v", r.Rejected)
	var counted int64
	f.eng.Read(func(st *projections.State) {
		r, ok := st.Run(run)
		require.True(t, ok)
		counted = int64(r.Usage.Events)
	})
	require.LessOrEqual(t, counted, int64(f.srv.issuers.scanInTurn), "the run's usage counts few events")
	require.Greater(t, lastVersion(t, f, run), uint64(2*commands.MaxImportEvents), "its stream has many")

	giveBack := holdRebuilds(t, f, roToken)
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, credentialsRequest(t.Context(), run, roToken))
	require.Equal(t, http.StatusTooManyRequests, rec.Code, "the scan was not charged as a rebuild: body %q", rec.Body)
	giveBack()

	rebuilt := 0
	f.srv.states.holding = func() { rebuilt++ }
	rec = readCredentials(t, f, roToken, run)
	require.Equal(t, 1, rebuilt, "the scan took the rebuild slot")
	var body struct{ Credentials []credentialItem }
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.Len(t, body.Credentials, 1)
	require.Equal(t, "orchestrator", body.Credentials[0].IssuedBy, "%+v", body.Credentials[0])
}
