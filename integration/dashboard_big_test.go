package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
)

// bigRunEnv switches TestDashboardBigRun on; its value is the number of delegations (1 or less: 5,000).
const bigRunEnv = "CREWLOG_DASHBOARD_BIG"

// TestDashboardBigRun (CREWLOG_DASHBOARD_BIG=1): the page on a run with 5,000 delegations that ran their course
// (about 35,000 events). Every view draws, the tree starts folded under each worker, the page reads the whole
// history for the slider, and time travel to the middle shows the run then, with no exception thrown. It logs how
// long each took in the browser; it asserts no time (a shared machine's numbers are not the page's).
func TestDashboardBigRun(t *testing.T) {
	if os.Getenv(bigRunEnv) == "" {
		t.Skip(bigRunEnv + " is not set: the dashboard is not tried on a run with thousands of delegations")
	}
	browser, ok := chromium()
	if !ok {
		t.Skip("headless Chromium not found")
	}
	total, _ := strconv.Atoi(os.Getenv(bigRunEnv))
	if total <= 1 {
		total = 5000
	}
	const workers = 10
	ctx := testContext(t, 10*time.Minute)
	d := newDaemon(t, "--max-slots", "64")
	t.Cleanup(d.cleanup)
	d.start()
	login := d.dashboardURL(t)

	crew := bigCrew(ctx, t, d, workers, total/workers)
	b := newBrowser(ctx, t, browser)
	b.run(chromedp.Navigate(login), chromedp.WaitVisible(`#live[data-state="live"]`, chromedp.ByQuery))
	run := "#/run/" + crew + "/"
	for _, view := range []struct{ hash, ready string }{
		{run + "tree", `[data-node="w0"][aria-expanded="false"]`}, // 500 children: folded
		{run + "timeline", `.tl-row[data-outcome="completed"]`},
		{run + "ledger", `[data-key="acct:w0"]`},
		{run + "events", `section[data-tab="events"] tbody tr`},
		{run + "mailbox", `section[data-tab="mailbox"] .kind-group`},
		{"#/runs", `tbody tr[data-run]`},
		{"#/health", `[data-health] table, [data-health] .empty`},
	} {
		start := time.Now()
		b.step(view.hash, chromedp.Evaluate(fmt.Sprintf(`location.hash = %q`, view.hash), nil), chromedp.WaitVisible(view.ready, chromedp.ByQuery))
		t.Logf("%-40s drawn in %v", view.hash, time.Since(start))
	}

	start := time.Now()
	b.step("history", chromedp.Evaluate(fmt.Sprintf(`location.hash = %q`, run+"tree"), nil),
		chromedp.WaitVisible(`[data-travel="live"][data-ready]`, chromedp.ByQuery))
	var where string
	b.run(chromedp.Text(`.where`, &where, chromedp.ByQuery))
	t.Logf("the whole history read in %v: %s", time.Since(start), where)

	start = time.Now()
	b.step("time travel", chromedp.Evaluate(`(() => {
			const s = document.getElementById('travel-slider');
			s.value = String(Math.floor(Number(s.max) / 2));
			s.dispatchEvent(new Event('input', { bubbles: true }));
		})()`, nil),
		chromedp.WaitVisible(`[data-travel="past"]:not([data-pending])`, chromedp.ByQuery),
		chromedp.WaitVisible(`[data-node="w0"]`, chromedp.ByQuery))
	t.Logf("time travel to the middle in %v", time.Since(start))
	require.Empty(t, b.exceptions(), "the page threw")
}

// bigCrew makes a run whose workers each delegate perTask times; the orchestrator spawns and settles every
// admitted delegation at once, so the slot pool never runs dry. It returns the run's id.
func bigCrew(ctx context.Context, t *testing.T, d *daemon, workers, perTask int) string {
	admin := d.mustDial(ctx, adminHello(d))
	var run runCreated
	require.NoError(t, admin.Call(ctx, "run.create", map[string]any{"team": "big", "goal": "many delegations", "cwd": "/r",
		"budgetTotal": 1 << 40}, &run))
	orchHello := client.Hello{RunID: run.RunID, TaskID: "orchestrator", Token: run.OrchestratorToken}
	orch := d.mustDial(ctx, orchHello)
	require.NoError(t, orch.Call(ctx, "run.transition", map[string]any{"to": "running"}, nil))
	errs := make(chan error, workers)
	for i := range workers {
		task := fmt.Sprintf("w%d", i)
		require.NoError(t, orch.Call(ctx, "task.create", map[string]any{"taskId": task, "role": "executor", "agent": "a", "title": task, "cwd": "/r/" + task}, nil))
		require.NoError(t, orch.Call(ctx, "task.transition", map[string]any{"taskId": task, "to": "running"}, nil))
		var cred credential
		require.NoError(t, orch.Call(ctx, "credential.issue", map[string]any{"taskId": task}, &cred))
		worker := d.mustDial(ctx, client.Hello{RunID: run.RunID, TaskID: task, Token: cred.Token})
		settler := d.mustDial(ctx, orchHello)
		go func() {
			errs <- func() error {
				for range perTask {
					var adm admitted
					if err := worker.Call(ctx, "delegate.request", map[string]any{"prompt": "p", "description": "d", "budgetTokens": 10}, &adm); err != nil {
						return err
					}
					if err := settler.Call(ctx, "delegate.spawned", map[string]any{"subId": adm.GrandchildTaskRef, "pid": 1}, nil); err != nil {
						return err
					}
					if err := settler.Call(ctx, "delegate.settle", map[string]any{"subId": adm.GrandchildTaskRef, "outcome": "ok", "text": "done", "usageTokens": 12}, nil); err != nil {
						return err
					}
				}
				return nil
			}()
		}()
	}
	for range workers {
		require.NoError(t, <-errs)
	}
	return run.RunID
}
