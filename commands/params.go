package commands

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/events/jsonscan"
)

// ErrUnknownMethod is returned (wrapped, with the method) by ParseCommand for
// a method it does not know; the broker answers it not-implemented.
var ErrUnknownMethod = errors.New("commands: unknown method")

// Caller is the identity a request authenticated as: Role is
// events.RoleWorker, events.RoleOrchestrator or events.RoleAdmin; RunID and
// TaskID are what the credential is scoped to (an admin has neither).
type Caller struct {
	Role   string
	RunID  string
	TaskID string
}

// method is one entry of the method table: who may call it, whether unknown
// params keys are refused, and how params become a command.
type method struct {
	who    audience
	strict bool
	parse  func(p *paramReader, c Caller, runID string) Command
}

// audience is the set of roles a method admits.
type audience int

const (
	anyRole     audience = iota // worker, orchestrator or admin
	runtimeRole                 // orchestrator or admin
	workerRole                  // a worker with a task-scoped credential
	adminRole                   // the daemon's admin credential
)

// methods is every method ParseCommand knows. pi-crew's own methods
// tolerate unknown params keys, as pi-crew does (a pi-crew client may send
// more than crewlog reads); crewlog's engine methods refuse them, so a
// misspelt key is an error rather than a silently ignored field.
var methods = map[string]method{
	"delegate.request": {workerRole, false, parseDelegateRequest},
	"msg.send":         {anyRole, false, parseMessageSend},
	"steer.push":       {runtimeRole, false, parseSteerPush},
	"escalate":         {anyRole, false, parseEscalate},
	"wait.request":     {workerRole, false, parseWaitRequest},
	"wait.resolve":     {workerRole, false, parseWaitResolve},

	"run.create":        {adminRole, true, parseRunCreate},
	"run.transition":    {runtimeRole, true, parseRunTransition},
	"task.create":       {runtimeRole, true, parseTaskCreate},
	"task.transition":   {runtimeRole, true, parseTaskTransition},
	"task.usage":        {runtimeRole, true, parseTaskUsage},
	"credential.issue":  {runtimeRole, true, parseCredentialIssue},
	"credential.revoke": {runtimeRole, true, parseCredentialRevoke},
	"delegate.spawned":  {runtimeRole, true, parseDelegateSpawned},
	"delegate.settle":   {runtimeRole, true, parseDelegateSettle},
	"delegate.cancel":   {runtimeRole, true, parseDelegateCancel},
	"mailbox.deliver":   {anyRole, true, parseMailboxDeliver},
	"mailbox.ack":       {anyRole, true, parseMailboxAck},

	"job.create":          {runtimeRole, true, parseJobCreate},
	"job.transition":      {runtimeRole, true, parseJobTransition},
	"job.disconnect":      {runtimeRole, true, parseJobDisconnect},
	"job.roots_reset":     {runtimeRole, true, parseJobRootsReset},
	"lease.open":          {runtimeRole, true, parseLeaseOpen},
	"lease.clear":         {runtimeRole, true, parseLeaseClear},
	"manifest.revalidate": {runtimeRole, true, parseManifestRevalidate},
	"proxy.complete":      {runtimeRole, true, parseProxyComplete},
	"proxy.request":       {workerRole, true, parseProxyRequest},
	"proxy.cancel":        {workerRole, true, parseProxyCancel},
}

// Methods lists every method ParseCommand knows, sorted.
func Methods() []string {
	out := make([]string, 0, len(methods))
	for m := range methods {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// ParseCommand turns a request (method and JSON params) from an
// authenticated caller into a command. The run and, for workers, the task
// come from the credential, never from params; an admin, scoped to no run,
// names it with params.runId.
//
// Errors: a *RejectedError (forbidden for a role the method does not admit,
// bad-params for params of the wrong shape or type) to answer as is, or an
// error wrapping ErrUnknownMethod. Range checks are left to Decide, except
// for delegate.request, whose parameter checks SPEC §4.1 puts before
// anything else; a list the command refuses past a bound is decoded no
// further than one element past it, which Decide refuses as the whole. It
// never panics.
func ParseCommand(name string, params json.RawMessage, c Caller) (Command, error) {
	m, ok := methods[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownMethod, name)
	}
	if err := m.who.admits(name, c); err != nil {
		return nil, err
	}
	p, err := readParams(name, params)
	if err != nil {
		return nil, err
	}
	return m.parseFrom(name, p, c)
}

// ParseMembers is ParseCommand for params that are a JSON object already
// split into its members, each value valid JSON (what decoding the object to
// a map[string]json.RawMessage gives): the broker splits the params of every
// request in the scan that takes out its commandId, so they are not decoded
// twice. It copies what it keeps of members.
func ParseMembers(name string, members map[string]json.RawMessage, c Caller) (Command, error) {
	m, ok := methods[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownMethod, name)
	}
	if err := m.who.admits(name, c); err != nil {
		return nil, err
	}
	return m.parseFrom(name, newParamReader(name, members), c)
}

// parseFrom makes the command of method name out of what p reads.
func (m method) parseFrom(name string, p *paramReader, c Caller) (Command, error) {
	runID, err := p.runID(c, !runOptionalForAdmin(name))
	if err != nil {
		return nil, err
	}
	cmd := m.parse(p, c, runID)
	if m.strict {
		p.refuseUnknown()
	}
	if p.err != nil {
		return nil, p.err
	}
	if dr, ok := cmd.(*DelegateRequest); ok {
		if err := dr.validate(); err != nil {
			return nil, err
		}
	}
	return cmd, nil
}

// runOptionalForAdmin: run.create mints the run id, and delegate.cancel and delegate.settle let the admin name a
// slot holder by subId alone (the pool is daemon-wide).
func runOptionalForAdmin(name string) bool {
	return name == "run.create" || name == "delegate.cancel" || name == "delegate.settle"
}

func (a audience) admits(name string, c Caller) error {
	switch {
	case c.Role != events.RoleWorker && c.Role != events.RoleOrchestrator && c.Role != events.RoleAdmin:
		return reject(CodeForbidden, "forbidden", "%s: unknown caller role %q", name, c.Role)
	case a == workerRole && (c.Role != events.RoleWorker || c.TaskID == "" || c.RunID == ""):
		if name == "delegate.request" {
			return reject(CodeForbidden, "no-task-credential",
				"delegate requires a task-scoped token; re-dispatch with PI_CREW_BROKER_TASK_ID")
		}
		return reject(CodeForbidden, "no-task-credential",
			"%s requires a task-scoped token; re-dispatch with PI_CREW_BROKER_TASK_ID", name)
	case a == runtimeRole && c.Role == events.RoleWorker:
		return reject(CodeForbidden, "forbidden", "%s requires an orchestrator or admin credential", name)
	case a == adminRole && c.Role != events.RoleAdmin:
		return reject(CodeForbidden, "forbidden", "%s requires the admin credential", name)
	case c.Role == events.RoleWorker && (c.TaskID == "" || c.RunID == ""):
		return reject(CodeForbidden, "no-task-credential",
			"%s requires a task-scoped token; re-dispatch with PI_CREW_BROKER_TASK_ID", name)
	}
	return nil
}

// runID is the run a request is about: the credential's, or for an admin
// params.runId (required when need). A runId in params that names another
// run than the credential's is forbidden.
func (p *paramReader) runID(c Caller, need bool) (string, error) {
	id := p.str("runId", false)
	if p.err != nil {
		return "", p.err
	}
	if c.Role == events.RoleAdmin {
		if id == "" && need {
			return "", badParams("%s: invalid params: runId is required with the admin credential", p.method)
		}
		return id, nil
	}
	if id != "" && id != c.RunID {
		return "", reject(CodeForbidden, "forbidden", "%s: the credential is scoped to another run", p.method)
	}
	return c.RunID, nil
}

func parseDelegateRequest(p *paramReader, c Caller, runID string) Command {
	return &DelegateRequest{
		RunID: runID, TaskID: c.TaskID, Prompt: p.str("prompt", true), Description: p.optStr("description"),
		Role: p.optStr("role"), Model: p.optStr("model"), MaxTurns: p.optInt("maxTurns"),
		BudgetTokens: p.optInt64("budgetTokens"), TimeoutSec: p.optFloat("timeoutSec"),
	}
}

func parseMessageSend(p *paramReader, c Caller, runID string) Command {
	cmd := &MessageSend{
		RunID: runID, To: p.recipients("to"), Body: p.jsonBody("body"), MessageKind: p.str("kind", false),
		Priority: p.str("priority", false), ReplyTo: p.str("replyTo", false), Subject: p.str("subject", false),
		QuestionID: p.str("questionId", false),
	}
	if c.Role == events.RoleWorker {
		cmd.FromTask = c.TaskID
	}
	return cmd
}

func parseSteerPush(p *paramReader, _ Caller, runID string) Command {
	return &SteerPush{RunID: runID, TaskID: p.str("taskId", true), Body: p.str("body", true),
		Priority: p.str("priority", false)}
}

func parseEscalate(p *paramReader, c Caller, runID string) Command {
	cmd := &Escalate{RunID: runID, To: p.str("to", false), Body: p.body("body"), Priority: p.str("priority", false)}
	if c.Role == events.RoleWorker {
		cmd.FromTask = c.TaskID
	}
	return cmd
}

func parseWaitRequest(p *paramReader, c Caller, runID string) Command {
	p.ownTask(c)
	var opts []string
	if p.has("options") {
		opts = p.strs("options", MaxAskOptions)
	}
	return &WaitRequest{RunID: runID, TaskID: c.TaskID, Question: p.str("question", true), Options: opts,
		TimeoutSec: p.optFloat("timeoutSec")}
}

func parseWaitResolve(p *paramReader, c Caller, runID string) Command {
	p.ownTask(c)
	return &WaitResolve{RunID: runID, TaskID: c.TaskID, QuestionID: p.str("questionId", true)}
}

func parseRunCreate(p *paramReader, _ Caller, runID string) Command {
	// NB: the broker sets OrchestratorDigest after minting the
	// orchestrator's secret; it is never a param.
	return &RunCreate{
		RunID: runID, Team: p.str("team", true), Workflow: p.str("workflow", false), Goal: p.str("goal", true),
		Cwd: p.str("cwd", true), BudgetTotal: p.optInt64("budgetTotal"), BudgetUnlimited: p.bool("budgetUnlimited"),
		BudgetWarning: p.optFloat("budgetWarning"), BudgetAbort: p.optFloat("budgetAbort"),
	}
}

func parseRunTransition(p *paramReader, _ Caller, runID string) Command {
	return &RunTransition{RunID: runID, To: p.str("to", true), Summary: p.str("summary", false),
		Reason: p.str("reason", false)}
}

func parseTaskCreate(p *paramReader, _ Caller, runID string) Command {
	var deps []string
	if p.has("dependsOn") {
		deps = p.strs("dependsOn", MaxDependsOn)
	}
	return &TaskCreate{
		RunID: runID, TaskID: p.str("taskId", true), Role: p.str("role", true), Agent: p.str("agent", true),
		Title: p.str("title", true), Cwd: p.str("cwd", true), DependsOn: deps, StepID: p.str("stepId", false),
		Model: p.str("model", false), Depth: int(p.int64("depth", false)),
	}
}

func parseTaskTransition(p *paramReader, _ Caller, runID string) Command {
	return &TaskTransition{
		RunID: runID, TaskID: p.str("taskId", true), To: p.str("to", true), Error: p.str("error", false),
		Reason: p.str("reason", false), Cwd: p.str("cwd", false),
	}
}

func parseTaskUsage(p *paramReader, _ Caller, runID string) Command {
	return &TaskUsage{
		RunID: runID, TaskID: p.str("taskId", true), Input: p.int64("input", true), Output: p.int64("output", true),
		CacheRead: p.int64("cacheRead", true), CacheWrite: p.int64("cacheWrite", true), Cost: p.float("cost"),
		Turns: p.int64("turns", false),
	}
}

func parseCredentialIssue(p *paramReader, _ Caller, runID string) Command {
	// NB: Digest stays empty; the broker sets it after minting the secret.
	return &CredentialIssue{RunID: runID, TaskID: p.str("taskId", true)}
}

func parseCredentialRevoke(p *paramReader, _ Caller, runID string) Command {
	return &CredentialRevoke{RunID: runID, TaskID: p.str("taskId", true), Reason: p.str("reason", false)}
}

func parseDelegateSpawned(p *paramReader, _ Caller, runID string) Command {
	return &DelegateSpawned{RunID: runID, SubID: p.str("subId", true), PID: int(p.int64("pid", true))}
}

func parseDelegateSettle(p *paramReader, _ Caller, runID string) Command {
	return &DelegateSettle{
		RunID: runID, SubID: p.str("subId", true), Outcome: p.str("outcome", true), Text: p.str("text", true),
		UsageTokens: p.optInt64("usageTokens"),
	}
}

func parseDelegateCancel(p *paramReader, _ Caller, runID string) Command {
	return &DelegateCancel{RunID: runID, SubID: p.str("subId", true), Reason: p.str("reason", false)}
}

func parseMailboxDeliver(p *paramReader, c Caller, runID string) Command {
	return &MailboxDeliver{RunID: runID, Recipient: p.mailbox(c), MessageIDs: p.strs("messageIds", MaxMessageIDs)}
}

func parseMailboxAck(p *paramReader, c Caller, runID string) Command {
	return &MailboxAck{RunID: runID, Recipient: p.mailbox(c), MessageIDs: p.strs("messageIds", MaxMessageIDs)}
}

// paramReader reads typed fields out of a params object. The first problem
// is kept in err and every later read is a no-op, so parse functions read
// straight through and ParseCommand checks once.
type paramReader struct {
	method string
	m      map[string]json.RawMessage
	read   []string // the keys asked for (a handful: a map cost more), in readInline while they fit
	err    error
	// readInline holds read for every method's keys (TestEveryMethodsReadsFitTheReadersOwnList): a list grown by
	// append was four or five allocations of every parse.
	readInline [maxParamsRead]string
	// probe, when set, records what a parse function reads instead of reading (DescribeMethod).
	probe *paramProbe
}

// maxParamsRead is the most keys a method's parse reads (task.create's ten, and room for a few more).
const maxParamsRead = 12

// newParamReader is the reader of members, noting its reads in its own list.
func newParamReader(method string, members map[string]json.RawMessage) *paramReader {
	p := &paramReader{method: method, m: members}
	p.read = p.readInline[:0]
	return p
}

func readParams(method string, params json.RawMessage) (*paramReader, error) {
	p := newParamReader(method, map[string]json.RawMessage{})
	raw := bytes.TrimSpace(params)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return p, nil // pi-crew sends null for "no params"
	}
	if raw[0] != '{' {
		return nil, p.invalid("params must be an object")
	}
	if err := json.Unmarshal(raw, &p.m); err != nil {
		return nil, p.invalid("params are not valid JSON")
	}
	return p, nil
}

func (p *paramReader) invalid(format string, args ...any) *RejectedError {
	return badParams("%s: invalid params: %s", p.method, fmt.Sprintf(format, args...))
}

func (p *paramReader) fail(key, want string) {
	if p.err == nil {
		p.err = p.invalid("%s must be %s", key, want)
	}
}

// noteRead records that key was asked for (refuseUnknown).
func (p *paramReader) noteRead(key string) {
	if !slices.Contains(p.read, key) {
		p.read = append(p.read, key)
	}
}

// get returns key's raw value; absent and null are both "not given".
func (p *paramReader) get(key string, required bool, want string) (json.RawMessage, bool) {
	p.noteRead(key)
	if p.probe != nil {
		p.probe.note(key, want, required)
		return nil, false
	}
	v, ok := p.m[key]
	if !ok || string(v) == "null" {
		if required {
			p.fail(key, want)
		}
		return nil, false
	}
	if len(v) == 0 {
		// NB: not JSON (ParseMembers' caller promises JSON): every reader
		// looks at v[0].
		p.fail(key, want)
		return nil, false
	}
	return v, p.err == nil
}

// has reports whether key is given (not absent, not null); it counts as a
// read of key.
func (p *paramReader) has(key string) bool {
	p.noteRead(key)
	if p.probe != nil {
		p.probe.optional[key] = true
		return true // so that the read it guards is recorded too
	}
	v, ok := p.m[key]
	return ok && string(v) != "null"
}

func (p *paramReader) str(key string, required bool) string {
	v, ok := p.get(key, required, "a string")
	if !ok {
		return ""
	}
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' && bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v) {
		return string(v[1 : len(v)-1]) // no escape: the bytes are the string
	}
	var s string
	if v[0] != '"' || json.Unmarshal(v, &s) != nil {
		p.fail(key, "a string")
	}
	return s
}

func (p *paramReader) optStr(key string) *string {
	if !p.has(key) {
		return nil
	}
	s := p.str(key, true)
	return &s
}

// body reads a message body: a string as is, any other JSON value as its
// compact JSON text (pi-crew stringifies non-string bodies).
func (p *paramReader) body(key string) string {
	v, ok := p.get(key, true, "present")
	if !ok {
		return ""
	}
	if v[0] == '"' {
		return p.str(key, true)
	}
	return string(p.compact(key, v))
}

// jsonBody reads msg.send's body as pi-crew stores it (safeStringify, D§7.5): the JSON text of whatever value was
// given, a string included ("hi" is stored as "\"hi\""). A string is re-encoded the way JSON.stringify writes it
// (no HTML escaping); other values keep their key order and are only compacted.
func (p *paramReader) jsonBody(key string) string {
	v, ok := p.get(key, true, "present")
	if !ok {
		return ""
	}
	if v[0] == '"' {
		s := p.str(key, true)
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.Encode(s) // a decoded string always encodes
		return strings.TrimSuffix(b.String(), "\n")
	}
	return string(p.compact(key, v))
}

// compact is JSON value v of key without its spaces, in a buffer of its own (ParseMembers' values may alias the
// caller's), or nil when v is not JSON (key fails).
func (p *paramReader) compact(key string, v []byte) []byte {
	b := bytes.NewBuffer(make([]byte, 0, len(v)))
	if json.Compact(b, v) != nil {
		p.fail(key, "JSON")
		return nil
	}
	return b.Bytes()
}

// maxExactInt is 2^53: every integer up to it is a float64 of its own, as it is a JavaScript number.
const maxExactInt = 1 << 53

// int64 reads an integer. Like pi-crew's Number.isInteger, an integral
// number written with a fraction or exponent (2.0, 1e3) is accepted; 1.5,
// strings and anything beyond int64 are not. A number is the float64
// JavaScript reads, however it is spelt: 9007199254740993 is 2^53, as
// 9007199254740993.0 is, so that one number is one request (one
// fingerprint), accepted or refused alike.
func (p *paramReader) int64(key string, required bool) int64 {
	v, ok := p.get(key, required, "an integer")
	if !ok {
		return 0
	}
	if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		p.fail(key, "an integer")
		return 0
	}
	if n, err := strconv.ParseInt(string(v), 10, 64); err == nil && -maxExactInt <= n && n <= maxExactInt {
		return n
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		p.fail(key, "an integer")
		return 0
	}
	return int64(f)
}

func (p *paramReader) optInt64(key string) *int64 {
	if !p.has(key) {
		return nil
	}
	n := p.int64(key, true)
	return &n
}

func (p *paramReader) optInt(key string) *int {
	n := p.optInt64(key)
	if n == nil {
		return nil
	}
	if *n < math.MinInt32 || *n > math.MaxInt32 {
		p.fail(key, "an integer")
	}
	i := int(*n)
	return &i
}

func (p *paramReader) float(key string) float64 {
	v, ok := p.get(key, false, "a number")
	if !ok {
		return 0
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if v[0] != '-' && (v[0] < '0' || v[0] > '9') || err != nil {
		p.fail(key, "a finite number")
	}
	if f == 0 {
		// NB: -0 is 0, as in JavaScript (-0 === 0, JSON.stringify(-0) is "0"): one request, one fingerprint, and
		// no "-0" recorded to read back.
		return 0
	}
	return f
}

func (p *paramReader) optFloat(key string) *float64 {
	if !p.has(key) {
		return nil
	}
	f := p.float(key)
	return &f
}

func (p *paramReader) bool(key string) bool {
	v, ok := p.get(key, false, "a boolean")
	if !ok {
		return false
	}
	if string(v) != "true" && string(v) != "false" {
		p.fail(key, "a boolean")
	}
	return string(v) == "true"
}

// strs reads a required array of strings, of which the command refuses more than most whatever they hold.
func (p *paramReader) strs(key string, most int) []string {
	v, ok := p.get(key, true, "an array of strings")
	if !ok {
		return nil
	}
	return p.list(key, v, most, "an array of strings")
}

// recipients reads msg.send's to: one string or an array of strings (at most MaxRecipients, msg.send refuses more).
func (p *paramReader) recipients(key string) []string {
	v, ok := p.get(key, true, "a string or an array of strings")
	if !ok {
		return nil
	}
	if v[0] == '"' {
		return []string{p.str(key, true)}
	}
	return p.list(key, v, MaxRecipients, "a string or an array of strings")
}

// list decodes v, key's value, as an array of strings (want otherwise), of which the command refuses more than
// most: only its first most+1 are decoded, so that the command refuses a longer list as it would the whole, and the
// elements after them are only checked to be strings (or null, read as "", as json.Unmarshal reads them), so the
// parse refuses what it would refuse of the whole. NB: a list's length is the command's to check (its answer, at the
// same place among its checks), but decoded whole, a frame of tens of thousands of short strings cost megabytes of
// slices, and the command held its list, a frame's worth of strings, in the writer's queue until it was refused.
func (p *paramReader) list(key string, v []byte, most int, want string) []string {
	if v[0] != '[' {
		p.fail(key, want)
		return nil
	}
	cut, strs := jsonscan.ListPrefix(v, most+1)
	if !strs {
		p.fail(key, want)
		return nil
	}
	if cut < len(v) {
		v = append(v[:cut:cut], ']')
	}
	var out []string
	if json.Unmarshal(v, &out) != nil {
		p.fail(key, want)
		return nil
	}
	return out
}

// ownTask checks wait.*'s to, which must name the caller's own task
// (GS-17); it may be left out.
func (p *paramReader) ownTask(c Caller) {
	if to := p.str("to", false); p.err == nil && to != "" && to != c.TaskID {
		p.err = reject(CodeForbidden, "forbidden", "%s: 'to' must match the authenticated task", p.method)
	}
}

// mailbox is the mailbox mailbox.deliver / mailbox.ack touch: a worker's
// own task's; for the orchestrator, params.taskId or the run inbox.
func (p *paramReader) mailbox(c Caller) string {
	id := p.str("taskId", false)
	if c.Role != events.RoleWorker {
		return id
	}
	if p.err == nil && id != "" && id != c.TaskID {
		p.err = reject(CodeForbidden, "forbidden", "%s: a worker may touch only its own mailbox", p.method)
	}
	return c.TaskID
}

// refuseUnknown fails on the first params key no read asked for (in key
// order, so the message is deterministic). NB: the least such key is kept as
// the map is ranged, not a list of them sorted: every strict parse looks.
func (p *paramReader) refuseUnknown() {
	if p.err != nil {
		return
	}
	first, found := "", false
	for k := range p.m {
		if (!found || k < first) && !slices.Contains(p.read, k) {
			first, found = k, true
		}
	}
	if found {
		p.err = p.invalid("unknown field %q", first)
	}
}
