package integration

import (
	"encoding/json"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
)

var crewctlBuild binaryBuild

// crewctlBinary builds cmd/crewctl once per test binary, like crewdBinary.
func crewctlBinary(t *testing.T) string { return crewctlBuild.binary(t, "crewctl") }

// crewctl runs crewctl against d and returns its stdout; it must succeed.
func (d *daemon) crewctl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(crewctlBinary(t), append([]string{"--data", d.data, "--socket", d.socket}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "crewctl %v: %s", args, stderr.String())
	return string(out)
}

// TestHostileRunsAgainstCrewd: a real crewd decides a slot-share refusal and message rate refusals; the daemon
// keeps serving the honest run, the hog's sibling worker within its share, and the hog's own orchestrator within its
// reserve; and after a restart `crewctl replay --explain` re-decides them without drift.
func TestHostileRunsAgainstCrewd(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	d := newDaemon(t, "--max-slots", "2", "--quota-msg-rate", "20")
	t.Cleanup(d.cleanup)
	d.start()
	hog, honest := newCrew(ctx, t, d, "h1", "h2"), newCrew(ctx, t, d, "w1")
	hogW, honestW := d.mustDial(ctx, hog.workers["h1"]), d.mustDial(ctx, honest.workers["w1"])
	admin := d.mustDial(ctx, adminHello(d))

	// Slots: the hog fills the pool while nobody waits; the honest run is refused and waits; the operator frees
	// one of the hog's slots by subId (crewctl cancel --free); the hog is then refused its share and the honest
	// run admitted.
	long := map[string]any{"prompt": "forever", "timeoutSec": 86400}
	var s1, s2 admitted
	require.NoError(t, hogW.Call(ctx, "delegate.request", long, &s1))
	require.NoError(t, hogW.Call(ctx, "delegate.request", long, &s2))
	require.Equal(t, wire.CodePolicyDenied, wireCode(honestW.Call(ctx, "delegate.request", delegateParams(""), nil)))
	require.Contains(t, d.crewctl(t, "slots"), s1.GrandchildTaskRef, "crewctl slots works with the admin token alone")
	require.Contains(t, d.crewctl(t, "cancel", s1.GrandchildTaskRef, "--free", "--reason", "slot hog"), "its slot is free")
	var slots struct {
		SubIDs []string `json:"subIds"`
	}
	require.NoError(t, admin.Call(ctx, "query.slots", nil, &slots))
	require.Equal(t, []string{s2.GrandchildTaskRef}, slots.SubIDs)
	err := hogW.Call(ctx, "delegate.request", long, nil)
	require.Equal(t, wire.CodePolicyDenied, wireCode(err))
	require.Contains(t, err.Error(), "its share of the pool")
	var mine admitted
	require.NoError(t, honestW.Call(ctx, "delegate.request", delegateParams(""), &mine))
	require.True(t, mine.OK)

	// Messages: 20 a minute per run, of which its workers may use 18 (crewd's default reserve of 10 % is the
	// orchestrator's), and any one of them 9 (crewd's default share, half). The hog's run already holds one (the
	// cancelled result): the hog stops at its 9, its sibling at the workers' 18.
	spam := func(w *client.Client) (sent, limited int) {
		for range 30 {
			err := w.Call(ctx, "msg.send", map[string]any{"to": "parent", "body": "spam"}, nil)
			switch wireCode(err) {
			case "":
				require.NoError(t, err)
				sent++
			case wire.CodeRateLimit:
				limited++
			default:
				t.Fatalf("msg.send: %v", err)
			}
		}
		return sent, limited
	}
	sent, limited := spam(hogW)
	require.Equal(t, []int{9, 21}, []int{sent, limited}, "the hog at its share")
	sent, limited = spam(d.mustDial(ctx, hog.workers["h2"]))
	require.Equal(t, []int{8, 22}, []int{sent, limited}, "its sibling at the rest of the workers' part")
	require.NoError(t, honestW.Call(ctx, "msg.send", map[string]any{"to": "parent", "body": "still served"}, nil))
	hogO := d.mustDial(ctx, hog.orch)
	require.NoError(t, hogO.Call(ctx, "steer.push", map[string]any{"taskId": "h1", "body": "stop spamming"}, nil),
		"the flooded run's orchestrator can still steer, within its reserve")
	require.NoError(t, hogW.Call(ctx, "ping", nil, nil), "refusals never close the connection")

	d.stop()
	out := d.crewctl(t, "replay", "--explain", "--run", hog.runID)
	require.Contains(t, out, "drift: 0")
	require.Contains(t, out, "slot-share-exceeded")
	// NB: the sibling's refusal at the run's rate is not recorded: a run records one refusal a minute.
	require.Contains(t, out, "quota worker-msg-rate: used 9 + adding 1 > max 9, one worker's share")
}

// TestTwoThousandDelegationsThroughCrewctl: a run with 2,000 delegations is fully readable through crewctl's
// views, which follow the paged queries' cursors: every delegation and task once, the slot pool with the admin
// credential alone.
func TestTwoThousandDelegationsThroughCrewctl(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 delegations against a real crewd")
	}
	ctx := testContext(t, 5*time.Minute)
	d := newDaemon(t, "--max-slots", "64")
	t.Cleanup(d.cleanup)
	d.start()
	c := newCrew(ctx, t, d, "p")
	w, orch := d.mustDial(ctx, c.workers["p"]), d.mustDial(ctx, c.orch)
	const n, batch = 2000, 50
	want := map[string]bool{}
	for len(want) < n {
		subs := make([]string, batch)
		errs := make([]error, batch)
		var wg sync.WaitGroup
		for i := range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var a admitted
				errs[i] = w.Call(ctx, "delegate.request", map[string]any{"prompt": "look", "description": strings.Repeat("d", 200)}, &a)
				subs[i] = a.GrandchildTaskRef
			}()
		}
		wg.Wait()
		for i := range batch {
			require.NoError(t, errs[i])
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = orch.Call(ctx, "delegate.settle", map[string]any{"subId": subs[i], "outcome": "ok", "text": "done"}, nil)
			}()
			want[subs[i]] = true
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
	}

	var dels struct {
		Delegations []delegation `json:"delegations"`
	}
	require.NoError(t, json.Unmarshal([]byte(d.crewctl(t, "delegations", c.runID, "--json")), &dels))
	require.Len(t, dels.Delegations, n)
	for _, del := range dels.Delegations {
		require.True(t, want[del.SubID], del.SubID)
		delete(want, del.SubID)
	}
	require.Empty(t, want, "every delegation once")
	var tasks struct {
		Tasks []json.RawMessage `json:"tasks"`
	}
	require.NoError(t, json.Unmarshal([]byte(d.crewctl(t, "tasks", c.runID, "--json")), &tasks))
	require.Len(t, tasks.Tasks, n+1, "the parent and 2,000 shadow tasks")
	require.Equal(t, n+1, strings.Count(d.crewctl(t, "show", "run", c.runID), "\n")-2, "the tree lists every task")
	require.Contains(t, d.crewctl(t, "slots"), "slots 0/64 held")
}
