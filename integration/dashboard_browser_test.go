package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
)

var updateScreenshots = flag.Bool("update-screenshots", false,
	"TestDashboard: also write its screenshots to docs/img/, where the README shows them")

// readmeScreenshots are the screenshots README.md shows, refreshed in docs/img/ by -update-screenshots.
var readmeScreenshots = []string{"dashboard-runs.png", "dashboard-why.png", "dashboard-time-travel.png", "dashboard-dark.png"}

// chromiumEnv names a Chromium (or Chrome) binary to use instead of the first found on PATH; with
// requireChromiumEnv set (CI), a missing browser fails the test instead of skipping it.
const (
	chromiumEnv        = "CREWLOG_CHROMIUM"
	requireChromiumEnv = "CREWLOG_REQUIRE_CHROMIUM"
)

// chromium finds a headless-capable Chromium: Debian's package installs /usr/bin/chromium.
func chromium() (string, bool) {
	if p := os.Getenv(chromiumEnv); p != "" {
		return p, true
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	return "", false
}

// dashCrew is the run the dashboard test drives over the socket: a run with a budget, three working tasks with
// worker credentials (one of them waiting for an answer), and the orchestrator that spawns and settles
// delegations.
type dashCrew struct {
	t       *testing.T
	ctx     context.Context
	runID   string
	admin   *client.Client
	orch    *client.Client
	workers map[string]*client.Client
}

func newDashCrew(ctx context.Context, t *testing.T, d *daemon) *dashCrew {
	admin := d.mustDial(ctx, adminHello(d))
	var run runCreated
	require.NoError(t, admin.Call(ctx, "run.create", map[string]any{
		"team": "core", "goal": "ship the dashboard", "cwd": "/repo", "workflow": "review",
		"budgetTotal": 100000, "budgetWarning": 0.8, "budgetAbort": 0.95,
	}, &run))
	c := &dashCrew{t: t, ctx: ctx, runID: run.RunID, admin: admin, workers: map[string]*client.Client{},
		orch: d.mustDial(ctx, client.Hello{RunID: run.RunID, TaskID: "orchestrator", Token: run.OrchestratorToken})}
	c.must(c.orch, "run.transition", map[string]any{"to": "running"}, nil)
	for _, task := range []string{"planner", "reviewer", "releaser"} {
		c.must(c.orch, "task.create", map[string]any{"taskId": task, "role": "executor", "agent": "agent",
			"title": task + " of the release", "cwd": "/repo/" + task, "model": "m1"}, nil)
		c.must(c.orch, "task.transition", map[string]any{"taskId": task, "to": "running"}, nil)
		var cred credential
		c.must(c.orch, "credential.issue", map[string]any{"taskId": task}, &cred)
		c.workers[task] = d.mustDial(ctx, client.Hello{RunID: run.RunID, TaskID: task, Token: cred.Token})
	}
	c.must(c.orch, "task.usage", map[string]any{"taskId": "planner", "input": 30000, "output": 12000, "cacheRead": 0, "cacheWrite": 0}, nil)
	// A task that finished while its credential stays valid: the health view lists it.
	c.must(c.orch, "task.create", map[string]any{"taskId": "scribe", "role": "writer", "agent": "agent", "title": "notes", "cwd": "/repo"}, nil)
	c.must(c.orch, "task.transition", map[string]any{"taskId": "scribe", "to": "running"}, nil)
	c.must(c.orch, "credential.issue", map[string]any{"taskId": "scribe"}, nil)
	c.must(c.orch, "task.transition", map[string]any{"taskId": "scribe", "to": "completed"}, nil)
	c.must(c.workers["releaser"], "wait.request", map[string]any{"question": "ship it?", "options": []string{"yes", "no"}, "timeoutSec": 600}, nil)
	return c
}

// otherRuns adds runs next to the crew's, so the run list shows statuses and a budget past its warning threshold.
func otherRuns(ctx context.Context, t *testing.T, d *daemon) {
	admin := d.mustDial(ctx, adminHello(d))
	for _, r := range []struct {
		goal, status string
		used         int
	}{{"migrate the store", "completed", 20000}, {"triage the flaky tests", "running", 86000}, {"write the changelog", "blocked", 0}} {
		var run runCreated
		require.NoError(t, admin.Call(ctx, "run.create", map[string]any{"team": "ops", "goal": r.goal, "cwd": "/repo",
			"budgetTotal": 100000, "budgetWarning": 0.8, "budgetAbort": 0.95}, &run))
		orch := d.mustDial(ctx, client.Hello{RunID: run.RunID, TaskID: "orchestrator", Token: run.OrchestratorToken})
		require.NoError(t, orch.Call(ctx, "run.transition", map[string]any{"to": "running"}, nil))
		if r.used > 0 {
			require.NoError(t, orch.Call(ctx, "task.create", map[string]any{"taskId": "main", "role": "executor", "agent": "agent", "title": r.goal, "cwd": "/repo"}, nil))
			require.NoError(t, orch.Call(ctx, "task.usage", map[string]any{"taskId": "main", "input": r.used, "output": 0, "cacheRead": 0, "cacheWrite": 0}, nil))
		}
		if r.status != "running" {
			require.NoError(t, orch.Call(ctx, "run.transition", map[string]any{"to": r.status}, nil))
		}
	}
}

func (c *dashCrew) must(cl *client.Client, method string, params, result any) {
	c.t.Helper()
	require.NoError(c.t, cl.Call(c.ctx, method, params, result), method)
}

// delegate asks for a grandchild as task's worker and returns the answer (admitted or not).
func (c *dashCrew) delegate(task, description string) (admitted, error) {
	var adm admitted
	err := c.workers[task].Call(c.ctx, "delegate.request", map[string]any{
		"prompt": "look around", "description": description, "role": "explorer", "budgetTokens": 5000,
	}, &adm)
	return adm, err
}

// events lists the run's events as the admin reads them over the socket.
func (c *dashCrew) events() []teamEvent {
	var all []teamEvent
	seq := uint64(0)
	for {
		var page sincePage
		c.must(c.orch, "events.since", map[string]any{"sinceSeq": seq}, &page)
		all = append(all, page.Events...)
		seq = page.NextSeq
		if !page.HasMore {
			return all
		}
	}
}

// TestDashboard opens the page in headless Chromium against a real crewd and a crew driven over the socket:
// login by the printed one-time link, the run list, a delegation that appears without a reload, a rejection
// whose reason is read from its "why?", and the time-travel slider showing the run before that delegation.
// Screenshots go to the test's temp dir; with -update-screenshots also to docs/img/ for the README.
func TestDashboard(t *testing.T) {
	browser, ok := chromium()
	if !ok && os.Getenv(requireChromiumEnv) != "" {
		t.Fatalf("%s is set but no chromium was found (apt-get install chromium chromium-driver)", requireChromiumEnv)
	}
	if !ok {
		t.Skip("headless Chromium not found (install Debian's chromium and chromium-driver, as .ci/run does, or set " +
			chromiumEnv + "): the dashboard is not tested in a browser")
	}
	ctx := testContext(t, 2*time.Minute)
	d := newDaemon(t, "--max-slots", "1")
	t.Cleanup(d.cleanup)
	d.start()
	login := d.dashboardURL(t)

	// Before the page opens: other runs, and in the crew's run one delegation that already ran its course
	// (admitted, spawned, settled with a charge).
	otherRuns(ctx, t, d)
	crew := newDashCrew(ctx, t, d)
	first, err := crew.delegate("planner", "map the packages")
	require.NoError(t, err)
	crew.must(crew.orch, "delegate.spawned", map[string]any{"subId": first.GrandchildTaskRef, "pid": 4242}, nil)
	crew.must(crew.orch, "delegate.settle", map[string]any{"subId": first.GrandchildTaskRef, "outcome": "ok",
		"text": "found 12 packages", "usageTokens": 6000}, nil)

	shots := t.TempDir()
	var shotNames []string
	b := newBrowser(ctx, t, browser)
	screenshot := func(name string) {
		t.Helper()
		var png []byte
		b.run(chromedp.CaptureScreenshot(&png))
		require.NoError(t, os.WriteFile(filepath.Join(shots, name), png, 0o600))
		shotNames = append(shotNames, name)
	}

	// Login: the one-time link sets the session cookie and lands on the run list.
	runRow := fmt.Sprintf(`tr[data-run=%q]`, crew.runID)
	b.run(chromedp.Navigate(login), chromedp.WaitVisible(runRow, chromedp.ByQuery),
		chromedp.WaitVisible(`#live[data-state="live"]`, chromedp.ByQuery))
	screenshot("dashboard-runs.png")

	// The run view: the task tree with the first delegation under its parent. A marker on window proves later
	// that nothing reloaded the page.
	firstNode := fmt.Sprintf(`[data-node=%q]`, first.GrandchildTaskRef)
	// Keyboard: j focuses the first row (the newest run, the crew's), Enter opens it.
	b.run(chromedp.KeyEvent("j"), chromedp.WaitVisible(runRow+`:focus`, chromedp.ByQuery), chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(firstNode, chromedp.ByQuery),
		chromedp.Evaluate(`window.crewlogNoReload = true`, nil))

	// Live: a delegation admitted now appears in the open page.
	second, err := crew.delegate("planner", "review the diff")
	require.NoError(t, err)
	secondNode := fmt.Sprintf(`[data-node=%q]`, second.GrandchildTaskRef)
	b.run(chromedp.WaitVisible(secondNode, chromedp.ByQuery))

	// A rejection: the one slot is held, so the reviewer's request is refused; its "why?" tells why.
	_, err = crew.delegate("reviewer", "check the tests")
	var refused *wire.Error
	require.ErrorAs(t, err, &refused)
	require.Equal(t, wire.CodePolicyDenied, refused.Code)
	var reason, decision string
	b.run(chromedp.WaitVisible(`[data-rejection="slots-exhausted"]`, chromedp.ByQuery),
		chromedp.Click(`[data-rejection="slots-exhausted"] button.why`, chromedp.ByQuery),
		chromedp.WaitVisible(`#dialog .reason[data-reason="slots-exhausted"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#dialog dl.kv`, chromedp.ByQuery),
		chromedp.Text(`#dialog .reason`, &reason, chromedp.ByQuery),
		chromedp.Text(`#dialog dl.kv`, &decision, chromedp.ByQuery))
	require.Contains(t, reason, "All 1 delegation slots were in use (1 of 1 held).")
	require.Contains(t, decision, "delegate.request", "the recorded decision is shown")
	screenshot("dashboard-why.png")

	// Keyboard: Esc closes the dialog, 2 opens the delegation timeline, where the rejection reads the same.
	var timelineReason string
	b.run(chromedp.KeyEvent("\x1b"), chromedp.WaitNotVisible(`#dialog`, chromedp.ByQuery),
		chromedp.KeyEvent("2"), chromedp.WaitVisible(`.tl-row[data-outcome="rejected"] .reason`, chromedp.ByQuery),
		chromedp.WaitVisible(fmt.Sprintf(`.tl-row[data-sub=%q][data-outcome="completed"]`, first.GrandchildTaskRef), chromedp.ByQuery),
		chromedp.Text(`.tl-row[data-outcome="rejected"] .reason`, &timelineReason, chromedp.ByQuery))
	require.Contains(t, timelineReason, "slots-exhausted")
	screenshot("dashboard-timeline.png")

	// Time travel: the slider back to the event just before the second request shows the run as it was then:
	// the first delegation settled, no second one, no rejection.
	evs := crew.events()
	before := -1
	for i, ev := range evs {
		if ev.Type == "delegate.requested" && ev.Data["subId"] == second.GrandchildTaskRef {
			before = i - 1
		}
	}
	require.Positive(t, before)
	b.run(chromedp.KeyEvent("1"), chromedp.WaitVisible(secondNode, chromedp.ByQuery),
		chromedp.WaitVisible(fmt.Sprintf(`#travel-slider[max="%d"]`, len(evs)-1), chromedp.ByQuery),
		chromedp.Evaluate(fmt.Sprintf(`(() => {
			const s = document.getElementById('travel-slider');
			s.value = '%d';
			s.dispatchEvent(new Event('input', { bubbles: true }));
		})()`, before), nil),
		chromedp.WaitVisible(fmt.Sprintf(`[data-travel="past"][data-position="%d"]:not([data-pending])`, evs[before].Metadata.Position), chromedp.ByQuery),
		chromedp.WaitNotPresent(secondNode, chromedp.ByQuery),
		chromedp.WaitNotPresent(`[data-rejection]`, chromedp.ByQuery),
		chromedp.WaitNotPresent(`[data-health-item]`, chromedp.ByQuery), // health is about now, not then
		chromedp.WaitVisible(firstNode, chromedp.ByQuery))
	var firstStatus string
	b.run(chromedp.Text(firstNode+` .pill`, &firstStatus, chromedp.ByQuery))
	require.Equal(t, "completed", firstStatus)
	screenshot("dashboard-time-travel.png")

	// [ steps one event further back: the first delegation's settlement is not there yet, so it still runs.
	b.run(chromedp.KeyEvent("["),
		chromedp.WaitVisible(fmt.Sprintf(`[data-travel="past"][data-position="%d"]:not([data-pending])`, evs[before-1].Metadata.Position), chromedp.ByQuery),
		chromedp.Text(firstNode+` .pill`, &firstStatus, chromedp.ByQuery))
	require.Equal(t, "running", firstStatus)

	// Back to live with l.
	b.run(chromedp.KeyEvent("l"), chromedp.WaitVisible(`[data-travel="live"]`, chromedp.ByQuery),
		chromedp.WaitVisible(secondNode, chromedp.ByQuery))

	// Every other view draws without an error: the ledger, asks, mailbox, credentials and events tabs, and health.
	for _, tab := range []struct{ key, ready string }{
		{"3", `[data-key="acct:planner"]`},
		// Enter on the planner's account opens its history: two reservations and a charge, each with its why?.
		{"\r", `[data-history="planner"] tbody tr:nth-child(3) button.why`},
		{"4", `section[data-tab="asks"] [data-deadline]`},
		{"5", `section[data-tab="mailbox"] .kind-group[data-kind="response"]`},
		{"6", `section[data-tab="credentials"] tbody tr`},
		{"7", `section[data-tab="events"] button.why`},
	} {
		if tab.key == "\r" {
			b.step("ledger history", chromedp.Focus(`[data-key="acct:planner"]`, chromedp.ByQuery), chromedp.KeyEvent(tab.key),
				chromedp.WaitVisible(tab.ready, chromedp.ByQuery))
			continue
		}
		b.step("tab "+tab.key, chromedp.KeyEvent(tab.key), chromedp.WaitVisible(tab.ready, chromedp.ByQuery))
		screenshot("dashboard-tab-" + tab.key + ".png")
	}
	// The jobs tab, live: a job created now appears with its lease, and its worker's call of a tool the grant
	// leaves out is shown refused, with the reason in words.
	b.step("tab 8", chromedp.KeyEvent("8"), chromedp.WaitVisible(`section[data-tab="jobs"]`, chromedp.ByQuery))
	var created struct {
		Nonce string `json:"nonce"`
	}
	crew.must(crew.orch, "job.create", map[string]any{"jobId": "J1", "taskId": "reviewer", "tools": jobKillGrant}, &created)
	crew.must(crew.orch, "lease.open", map[string]any{"jobId": "J1", "mode": "start", "rootToolCallId": "call-1"}, nil)
	crew.must(crew.workers["reviewer"], "proxy.request", map[string]any{"jobId": "J1", "requestId": "r1", "nonce": created.Nonce,
		"tool": "read", "args": map[string]any{"path": "go.mod"}}, nil)
	err = crew.workers["reviewer"].Call(ctx, "proxy.request", map[string]any{"jobId": "J1", "requestId": "r2",
		"nonce": created.Nonce, "tool": "bash", "args": map[string]any{}}, nil)
	require.ErrorAs(t, err, &refused)
	require.Equal(t, wire.CodePolicyDenied, refused.Code)
	var job, why string
	b.run(chromedp.WaitVisible(`[data-job="J1"] [data-reason="not-granted"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`[data-job="J1"] [data-job-lease="active"]`, chromedp.ByQuery),
		chromedp.Text(`[data-job="J1"] [data-reason="not-granted"]`, &why, chromedp.ByQuery),
		chromedp.Text(`[data-job="J1"]`, &job, chromedp.ByQuery))
	require.Equal(t, "the tool is not in the job’s grant", why)
	require.Contains(t, job, "generation 1")
	require.Contains(t, job, "call-1")
	require.Contains(t, job, "in flight 1 / 32")
	require.Contains(t, job, "admitted")
	screenshot("dashboard-tab-8.png")

	var health string
	b.run(chromedp.KeyEvent("g"), chromedp.KeyEvent("h"), chromedp.WaitVisible(`[data-health="live credential"] tbody tr`, chromedp.ByQuery),
		chromedp.Text(`[data-health="live credential"] tbody`, &health, chromedp.ByQuery))
	require.Contains(t, health, "credential of scribe still valid; the task is completed")
	screenshot("dashboard-health.png")
	b.run(chromedp.NavigateBack(), chromedp.WaitVisible(`section[data-tab]`, chromedp.ByQuery))

	// The dark theme with t, on the task tree.
	b.run(chromedp.KeyEvent("1"), chromedp.WaitVisible(secondNode, chromedp.ByQuery),
		chromedp.KeyEvent("t"), chromedp.WaitVisible(`html[data-theme]`, chromedp.ByQuery))
	screenshot("dashboard-dark.png")

	var noReload bool
	b.run(chromedp.Evaluate(`window.crewlogNoReload === true`, &noReload))
	require.True(t, noReload, "the page was reloaded")
	require.Empty(t, b.exceptions(), "the page threw; console and chromedp: %v", b.consoleLogs())
	var violations []string
	b.run(chromedp.Evaluate(`window.crewlogCSPViolations || []`, &violations))
	require.Empty(t, violations, "the page broke its Content-Security-Policy")
	t.Logf("screenshots in %s: %s", shots, strings.Join(shotNames, ", "))

	if *updateScreenshots {
		for _, name := range readmeScreenshots {
			png, err := os.ReadFile(filepath.Join(shots, name))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join("..", "docs", "img", name), png, 0o644))
		}
	}
}

// recordCSPViolations runs before the page's own scripts in every document and keeps each
// securitypolicyviolation the document reports in window.crewlogCSPViolations.
const recordCSPViolations = `window.crewlogCSPViolations = [];
document.addEventListener('securitypolicyviolation', e =>
  window.crewlogCSPViolations.push(e.violatedDirective + ' refused ' + (e.blockedURI || 'inline') + ' at ' + e.sourceFile + ':' + e.lineNumber));`

// browser is one headless Chromium tab at 1280×800 that records the page's uncaught exceptions.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu     sync.Mutex
	thrown []string
	// logs are the page's console warnings and chromedp's own complaints (events of a newer Chromium it does not
	// know, say): shown on failure.
	logs []string
}

func newBrowser(ctx context.Context, t *testing.T, path string) *browser {
	// NB: not t.TempDir: Chromium's helper processes can still be writing its profile for a moment after the
	// browser is stopped, and t.TempDir's removal then fails the test. This cleanup, registered before the one
	// that stops the browser, runs after it and retries.
	profile, err := os.MkdirTemp("", "crewlog-chromium-")
	require.NoError(t, err)
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for os.RemoveAll(profile) != nil && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
	})
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // root in CI containers; the page is ours and local
		chromedp.WindowSize(1280, 800),
		chromedp.UserDataDir(profile),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	b := &browser{t: t}
	tabCtx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithErrorf(func(format string, args ...any) {
		b.mu.Lock()
		b.logs = append(b.logs, fmt.Sprintf(format, args...))
		b.mu.Unlock()
	}))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	b.ctx = tabCtx
	chromedp.ListenTarget(tabCtx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			b.thrown = append(b.thrown, e.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			// The page's warnings (a read that failed) explain a failure; they are shown with it.
			if e.Type == runtime.APITypeWarning || e.Type == runtime.APITypeError {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				b.logs = append(b.logs, "console."+string(e.Type)+": "+strings.Join(args, " "))
			}
		}
	})
	// NB: the first Run starts the browser and ties it to its context, so it must be the tab's own, not a
	// step's (which ends with the step). Every document the tab loads records the Content-Security-Policy
	// violations it meets (an inline style the policy refuses, say), for the test to read at the end.
	require.NoError(t, chromedp.Run(tabCtx, chromedp.EmulateViewport(1280, 800),
		chromedp.ActionFunc(func(ctx context.Context) error {
			_, err := page.AddScriptToEvaluateOnNewDocument(recordCSPViolations).Do(ctx)
			return err
		})))
	return b
}

// run runs actions in the tab. A hang fails the test at once with the page's state, rather than at the test's
// deadline; the bound guards against a hang and measures nothing.
func (b *browser) run(actions ...chromedp.Action) { b.t.Helper(); b.step("", actions...) }

// step runs actions; on failure it names what and shows the page's exceptions, chromedp's complaints and the
// page's main element, which usually explain it.
func (b *browser) step(what string, actions ...chromedp.Action) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var html string
		_ = chromedp.Run(b.ctx, chromedp.OuterHTML("main", &html, chromedp.ByQuery))
		b.t.Fatalf("%s: %v\npage exceptions: %v\nconsole and chromedp: %v\nmain: %s", what, err, b.exceptions(), b.consoleLogs(), html)
	}
}

const stepTimeout = 20 * time.Second

func (b *browser) consoleLogs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.logs)
}

func (b *browser) exceptions() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.thrown...)
}
