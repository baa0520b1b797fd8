package commands

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// scenarioEpoch is the scenario clock at the start of every case: the
// instant of D§12's run id team_20261001000000_….
var scenarioEpoch = time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)

// scenarioWorld is what one scenario case runs against: the log so far (as
// the engine would have committed it), the state folded from it, and the
// deterministic clock and id source the decisions see.
type scenarioWorld struct {
	t        *testing.T
	s        *projections.State
	log      []events.Event       // log[i] has position i+1
	versions map[string]uint64    // stream → last stream version
	history  []*projections.State // history[i] = state after position i (history[0] = empty)
	now      int64                // unix nanoseconds
	ids      int                  // ids minted so far
	commands int                  // requests decided so far (command ids)
	secrets  int                  // secrets the broker minted so far
	// ledger high-water marks, for the write-once and monotonic checks.
	granted map[string]int64
	spent   map[string]int64
}

func newScenarioWorld(t *testing.T) *scenarioWorld {
	s := projections.New()
	return &scenarioWorld{
		t: t, s: s, versions: map[string]uint64{}, history: []*projections.State{s.Clone()},
		now: scenarioEpoch.UnixNano(), granted: map[string]int64{}, spent: map[string]int64{},
	}
}

// newID is the Env's id source: a counter, so subIds read gc-00000001.
func (w *scenarioWorld) newID() string {
	w.ids++
	return fmt.Sprintf("%08d", w.ids)
}

func (w *scenarioWorld) env(actor events.Actor) Env {
	w.commands++
	return Env{Config: w.s.Config(), Now: w.now, NewID: w.newID, Actor: actor,
		CommandID: fmt.Sprintf("cmd-%d", w.commands)}
}

// commit gives evs their positions and stream versions, passes each payload
// through the log's codec (what a restart would read back) and folds them.
func (w *scenarioWorld) commit(evs []events.Event) error {
	for _, ev := range evs {
		b, err := events.EncodePayload(ev.Payload)
		if err != nil {
			return fmt.Errorf("encode %s: %w", ev.Type, err)
		}
		p, err := events.DecodePayload(ev.Type, ev.SchemaVersion, b)
		if err != nil {
			return fmt.Errorf("decode %s: %w", ev.Type, err)
		}
		if a, b := scenarioJSON(ev.Payload), scenarioJSON(p); a != b {
			return fmt.Errorf("%s does not survive the log codec:\n  decided %s\n  read    %s", ev.Type, a, b)
		}
		ev.Payload = p
		ev.Position = uint64(len(w.log) + 1)
		w.versions[ev.Stream]++
		ev.StreamVersion = w.versions[ev.Stream]
		w.log = append(w.log, ev)
		projections.Apply(w.s, ev)
		w.history = append(w.history, w.s.Clone())
	}
	return nil
}

// given folds one event written in a scenario file.
func (w *scenarioWorld) given(typ, stream, payload string) error {
	p := events.NewPayload(typ)
	if p == nil {
		return fmt.Errorf("unknown event type %q", typ)
	}
	dec := json.NewDecoder(strings.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		return fmt.Errorf("%s payload: %w", typ, err)
	}
	return w.commit([]events.Event{{
		Stream: stream, Type: typ, SchemaVersion: events.SchemaVersion(typ), Time: w.now,
		Actor: events.Actor{Role: events.RoleAdmin}, Payload: p,
	}})
}

// config folds an engine.configured built from key=value words; absent keys
// keep projections.DefaultConfig's values, and catalog absent means no
// catalog while "catalog=" is the empty (deny-all) catalog.
func (w *scenarioWorld) config(words []string) error {
	p := projections.DefaultConfig().Event()
	for _, kv := range words {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("config: %q is not key=value", kv)
		}
		var err error
		switch k {
		case "nestingEnabled":
			p.NestingEnabled, err = strconv.ParseBool(v)
		case "maxDepth":
			p.MaxDepth, err = strconv.Atoi(v)
		case "maxSlots":
			p.MaxSlots, err = strconv.Atoi(v)
		case "serializeOnPathOverlap":
			p.SerializeOnPathOverlap, err = strconv.ParseBool(v)
		case "unmeteredDelegates":
			p.UnmeteredDelegates = v
		case "settleGraceSec":
			p.SettleGraceSec, err = strconv.Atoi(v)
		case "slotShare":
			p.SlotShare, err = strconv.Atoi(v)
		case "slotWaitSec":
			p.SlotWaitSec, err = strconv.Atoi(v)
		case "quotaEvents":
			p.QuotaEvents, err = strconv.ParseInt(v, 10, 64)
		case "quotaBytes":
			p.QuotaBytes, err = strconv.ParseInt(v, 10, 64)
		case "quotaMsgsPerMin":
			p.QuotaMsgsPerMin, err = strconv.Atoi(v)
		case "quotaReserve":
			p.QuotaReserve, err = strconv.Atoi(v)
		case "quotaWorkerMsgShare":
			p.QuotaWorkerMsgShare, err = strconv.Atoi(v)
		case "quotaWorkerShare":
			p.QuotaWorkerShare, err = strconv.Atoi(v)
		case "waitMethodsEnabled":
			var on bool
			on, err = strconv.ParseBool(v)
			p.WaitMethodsDisabled = !on
		case "budgetMode":
			p.BudgetMode = recordedBudgetMode(v)
		case "proxyPayloadBytes":
			p.ProxyPayloadBytes, err = strconv.ParseInt(v, 10, 64)
		case "proxyManifestBytes":
			p.ProxyManifestBytes, err = strconv.ParseInt(v, 10, 64)
		case "proxyMaxInFlight":
			p.ProxyMaxInFlight, err = strconv.Atoi(v)
		case "proxyMaxRequests":
			p.ProxyMaxRequests, err = strconv.Atoi(v)
		case "revokedRootLimit":
			p.RevokedRootLimit, err = strconv.Atoi(v)
		case "rerouteEndedAttempts":
			p.RerouteEndedAttempts, err = strconv.ParseBool(v)
		case "shareByDelegator":
			p.ShareByDelegator, err = strconv.ParseBool(v)
		case "workerSlotShare":
			p.WorkerSlotShare, err = strconv.ParseBool(v)
		case "catalog":
			p.ModelCatalog = []string{}
			if v != "" {
				p.ModelCatalog = strings.Split(v, ",")
			}
		default:
			return fmt.Errorf("config: unknown key %q", k)
		}
		if err != nil {
			return fmt.Errorf("config: %s: %w", k, err)
		}
	}
	return w.commit([]events.Event{{
		Stream: events.EngineStream, Type: events.TypeEngineConfigured,
		SchemaVersion: events.SchemaVersion(events.TypeEngineConfigured), Time: w.now,
		Actor: events.Actor{Role: events.RoleEngine}, Payload: p,
	}})
}

// scenarioOutcome is what a when (or tick) produced.
type scenarioOutcome struct {
	events []events.Event
	result any            // on acceptance
	err    *RejectedError // on rejection
}

// when turns a request into a command exactly as the broker does
// (ParseCommand with the caller its credential authenticated) and decides it.
func (w *scenarioWorld) when(role, runID, taskID, method string, params json.RawMessage) (scenarioOutcome, error) {
	cmd, err := ParseCommand(method, params, Caller{Role: role, RunID: runID, TaskID: taskID})
	if err != nil {
		var rej *RejectedError
		switch {
		case errors.As(err, &rej):
			return scenarioOutcome{err: rej}, nil
		case errors.Is(err, ErrUnknownMethod):
			// Shown as the broker answers it.
			return scenarioOutcome{err: &RejectedError{Code: "not-implemented", Reason: "unknown-method",
				Message: err.Error()}}, nil
		}
		return scenarioOutcome{}, fmt.Errorf("ParseCommand returned a non-rejection error: %w", err)
	}
	// Between parsing and deciding, the broker mints the secrets a command
	// issues and hands the engine only their digests.
	switch c := cmd.(type) {
	case *CredentialIssue:
		c.Digest = w.digest()
	case *RunCreate:
		c.OrchestratorDigest = w.digest()
	case *JobCreate:
		c.NonceDigest = w.digest() // the job's nonce is secret-N
	}
	return w.decide(cmd, events.Actor{Role: role, TaskID: taskID}, runID)
}

// digest is the sha-256 of the next secret the broker mints: secret-1,
// secret-2, … in a scenario.
func (w *scenarioWorld) digest() string {
	w.secrets++
	return digestHex(fmt.Sprintf("secret-%d", w.secrets))
}

// digestHex is the credential digest of a secret, as the broker computes it.
func digestHex(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// tick is the engine clock's pass, as the engine actor: the commands
// DueExpiries chooses (the choice Engine.Tick makes), decided in order.
func (w *scenarioWorld) tick() (scenarioOutcome, error) {
	out := scenarioOutcome{result: []any{}}
	results := []any{}
	for _, c := range DueExpiries(w.s, w.now/1e6) {
		var runID string
		switch c := c.(type) {
		case *DelegateExpire:
			runID = c.RunID
		case *AskExpire:
			runID = c.RunID
		}
		o, err := w.decide(c, events.Actor{Role: events.RoleEngine}, runID)
		if err != nil {
			return out, err
		}
		if o.err != nil {
			return out, fmt.Errorf("tick: %s rejected: %v", c.Kind(), o.err)
		}
		out.events = append(out.events, o.events...)
		results = append(results, o.result)
	}
	out.result = results
	return out, nil
}

// decide runs Decide, checks that it is pure and that its events carry the
// env's envelope, and commits what it decided (a rejection's record too).
func (w *scenarioWorld) decide(cmd Command, actor events.Actor, runID string) (scenarioOutcome, error) {
	env := w.env(actor)
	before := w.s.Clone()
	ids := w.ids
	dec, err := Decide(w.s, cmd, env)
	require.Equal(w.t, before, w.s, "Decide(%s) modified the state", cmd.Kind())
	// Deciding is a function of the state and the input (the env's clock and ids included): the same decision
	// again, with the ids minted again from the same point, must be the same, byte for byte — or replay, audit and
	// a retry's answer would depend on map order or anything else outside them.
	first := decisionText(dec, err)
	w.ids = ids
	dec, err = Decide(w.s, cmd, env)
	require.Equal(w.t, first, decisionText(dec, err), "Decide(%s) decided differently the second time", cmd.Kind())
	out := scenarioOutcome{events: dec.Events, result: dec.Result}
	if err != nil {
		if !errors.As(err, &out.err) {
			return out, fmt.Errorf("Decide(%s) returned a non-rejection error: %w", cmd.Kind(), err)
		}
		out.result = nil
	}
	for _, ev := range dec.Events {
		switch {
		case runID != "" && ev.Stream != runID:
			return out, fmt.Errorf("%s: event on stream %q, the request's run is %q", ev.Type, ev.Stream, runID)
		case ev.Time != env.Now || ev.CommandID != env.CommandID || ev.Actor != actor:
			return out, fmt.Errorf("%s: envelope %+v does not carry the env", ev.Type, ev)
		case ev.SchemaVersion != events.SchemaVersion(ev.Type) || ev.SchemaVersion == 0:
			return out, fmt.Errorf("%s: schema version %d", ev.Type, ev.SchemaVersion)
		}
		if typ, ok := events.TypeOf(ev.Payload); !ok || typ != ev.Type {
			return out, fmt.Errorf("%s: payload %T is of type %q", ev.Type, ev.Payload, typ)
		}
	}
	if err := w.commit(dec.Events); err != nil {
		return out, err
	}
	if capacity := w.s.Config().MaxSlots; w.s.SlotsHeld() > capacity {
		return out, fmt.Errorf("%d slots held, capacity %d", w.s.SlotsHeld(), capacity)
	}
	return out, nil
}

// checkInvariants are the fold invariants every step must keep.
func (w *scenarioWorld) checkInvariants() error {
	page, err := w.s.Runs(projections.RunFilter{})
	if err != nil {
		return err
	}
	inFlight := 0
	for _, run := range page.Runs {
		for _, d := range w.s.Delegations(run.RunID) {
			if !d.Status.Terminal() {
				inFlight++
			}
			sh, ok := w.s.Task(run.RunID, d.SubID)
			if !ok || !sh.Shadow() || sh.Agent != events.DelegateAgent {
				return fmt.Errorf("delegation %s has no shadow task", d.SubID)
			}
		}
		for _, task := range w.s.Tasks(run.RunID) {
			if (task.Status == projections.TaskWaiting) != (task.Waiting != nil) {
				return fmt.Errorf("task %s is %s with waiting marker %v", task.TaskID, task.Status, task.Waiting)
			}
		}
		for _, a := range w.s.Ledger(run.RunID) {
			key := run.RunID + "/" + a.TaskID
			if a.TokensSpent != a.Reserved+a.Charged {
				return fmt.Errorf("account %s: spent %d != reserved %d + charged %d", key, a.TokensSpent,
					a.Reserved, a.Charged)
			}
			if g, seen := w.granted[key]; seen && g != a.TokensGranted {
				return fmt.Errorf("account %s: tokensGranted changed from %d to %d", key, g, a.TokensGranted)
			}
			if a.TokensSpent < w.spent[key] {
				return fmt.Errorf("account %s: tokensSpent decreased from %d to %d", key, w.spent[key], a.TokensSpent)
			}
			w.granted[key], w.spent[key] = a.TokensGranted, a.TokensSpent
		}
	}
	if inFlight != w.s.SlotsHeld() || len(w.s.InFlight()) != inFlight {
		return fmt.Errorf("slots held %d, in-flight delegations %d", w.s.SlotsHeld(), inFlight)
	}
	return nil
}

// rebuild is a restart: a fresh fold of the log up to position to (0 = all)
// must equal the state the steps built incrementally at that position, and
// so must a snapshot round trip. The rebuilt state then replaces the current
// one, and the log is cut at to, as if the daemon restarted from there.
func (w *scenarioWorld) rebuild(to int) error {
	if to == 0 {
		to = len(w.log)
	}
	if to > len(w.log) {
		return fmt.Errorf("rebuild: position %d is past the head %d", to, len(w.log))
	}
	fresh := projections.New()
	for _, ev := range w.log[:to] {
		projections.Apply(fresh, ev)
	}
	if !assertEqualStates(w.t, w.history[to], fresh, "fresh fold of positions 1..%d", to) {
		return fmt.Errorf("rebuild: the fresh fold differs")
	}
	b, err := projections.EncodeSnapshot(fresh)
	if err != nil {
		return err
	}
	snap, err := projections.DecodeSnapshot(b)
	if err != nil {
		return err
	}
	if !assertEqualStates(w.t, fresh, snap, "snapshot round trip at %d", to) {
		return fmt.Errorf("rebuild: the snapshot differs")
	}
	w.s, w.log, w.history = snap, w.log[:to], w.history[:to+1]
	w.versions = map[string]uint64{}
	for _, ev := range w.log {
		w.versions[ev.Stream] = ev.StreamVersion
	}
	return nil
}

func assertEqualStates(t *testing.T, want, got *projections.State, msg string, args ...any) bool {
	t.Helper()
	st := &softT{t: t}
	require.Equal(st, want, got, append([]any{msg}, args...)...)
	return !st.failed
}

// softT lets require report into a test without stopping it.
type softT struct {
	t      *testing.T
	failed bool
}

func (s *softT) Errorf(format string, args ...any) {
	s.t.Helper()
	s.failed = true
	s.t.Errorf(format, args...)
}
func (s *softT) FailNow() { s.failed = true }

// query renders a projections query as indented JSON.
func (w *scenarioWorld) query(args []string) (string, error) {
	need := func(n int) error {
		if len(args) != n+1 {
			return fmt.Errorf("state %s takes %d argument(s)", args[0], n)
		}
		return nil
	}
	inbox := func(r string) string {
		if r == "-" {
			return events.RunInbox
		}
		return r
	}
	var v any
	switch args[0] {
	case "slots":
		if err := need(0); err != nil {
			return "", err
		}
		v = w.s.Slots()
	case "config":
		if err := need(0); err != nil {
			return "", err
		}
		v = w.s.Config()
	case "inflight":
		if err := need(0); err != nil {
			return "", err
		}
		v = w.s.InFlight()
	case "run":
		if err := need(1); err != nil {
			return "", err
		}
		v = found(w.s.Run(args[1]))
	case "task":
		if err := need(2); err != nil {
			return "", err
		}
		v = found(w.s.Task(args[1], args[2]))
	case "tasks":
		if err := need(1); err != nil {
			return "", err
		}
		v = w.s.Tasks(args[1])
	case "delegation":
		if err := need(2); err != nil {
			return "", err
		}
		v = found(w.s.Delegation(args[1], args[2]))
	case "delegations":
		if err := need(1); err != nil {
			return "", err
		}
		v = w.s.Delegations(args[1])
	case "ledger":
		if err := need(1); err != nil {
			return "", err
		}
		v = w.s.Ledger(args[1])
	case "mailbox":
		if err := need(2); err != nil {
			return "", err
		}
		page, err := w.s.Mailbox(args[1], inbox(args[2]), projections.MailboxFilter{})
		if err != nil {
			return "", err
		}
		v = page.Messages
	case "asks":
		if err := need(1); err != nil {
			return "", err
		}
		v = w.s.Asks(args[1])
	case "credentials":
		if err := need(1); err != nil {
			return "", err
		}
		v = w.s.Credentials(args[1])
	case "credential":
		if err := need(2); err != nil {
			return "", err
		}
		v = found(w.s.Credential(args[1], args[2]))
	case "job":
		if err := need(2); err != nil {
			return "", err
		}
		v = found(w.s.Job(args[1], args[2]))
	case "roots":
		if err := need(1); err != nil {
			return "", err
		}
		v = w.s.RevokedRootsOf(args[1])
	case "authorize":
		// authorize R <parentToolCallId|-> <tool>: the job.authorize query.
		if err := need(3); err != nil {
			return "", err
		}
		a, err := w.s.Authorize(args[1], dash(args[2]), args[3])
		if err != nil {
			return "", err
		}
		v = a
	default:
		return "", fmt.Errorf("unknown state query %q", args[0])
	}
	return scenarioIndent(v)
}

// found renders a missing record as null.
func found[T any](v T, ok bool) any {
	if !ok {
		return nil
	}
	return v
}

// decisionText is everything a decision says: its events (envelope and payload), its result and its refusal.
func decisionText(d Decision, err error) string {
	return fmt.Sprintf("%s\n%s\n%v", scenarioJSON(d.Events), scenarioJSON(d.Result), err)
}

// scenarioJSON is the compact JSON of v, as written in scenario files.
func scenarioJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// scenarioIndent is the indented JSON of v, for state blocks.
func scenarioIndent(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}
