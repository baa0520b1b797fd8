package picrew

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/crewlog/crewlog/events"
)

// Skipped is one thing the import left out, and why. Path is relative to
// the crew root (slash-separated), so a report never names this machine.
type Skipped struct {
	Run    string `json:"run,omitempty"`
	Path   string `json:"path"`
	Line   int    `json:"line,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	Reason string `json:"reason"`
}

func (s Skipped) String() string {
	loc := s.Path
	if s.Line > 0 {
		loc += ":" + strconv.Itoa(s.Line)
	}
	if s.Seq > 0 {
		loc += fmt.Sprintf(" (seq %d)", s.Seq)
	}
	return loc + ": " + s.Reason
}

// runIDPattern is pi-crew's safe-path charset, which crewlog's stream
// names share.
var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)

// flexInt is an integer that pi-crew may write as a number, "" or null.
type flexInt int64

// UnmarshalJSON never fails: a value that is no integer (a string that does not parse as one, a fraction, another
// JSON value) is held at math.MinInt64, outside every range crewlog checks it against, for its record's parser to
// report as written (boundBudget). NB: a failed decode failed the whole manifest, and the run was not imported for
// one field; a fraction cut to the integer below it was a value the manifest does not hold.
func (n *flexInt) UnmarshalJSON(b []byte) error {
	*n = 0
	var s string
	if json.Unmarshal(b, &s) == nil {
		if s == "" {
			return nil
		}
		v, err := strconv.ParseInt(s, 10, 64)
		*n = flexInt(v)
		if err != nil {
			*n = math.MinInt64
		}
		return nil
	}
	if string(b) == "null" {
		return nil
	}
	var f float64
	err := json.Unmarshal(b, &f)
	// NB: a float outside int64 converts to what the platform makes of it (MinInt64 on amd64); held at the bound it
	// passed, it is outside every range crewlog checks it against on every platform.
	switch {
	case err != nil || f != math.Trunc(f):
		*n = math.MinInt64
	case f >= math.MaxInt64:
		*n = math.MaxInt64
	case f < math.MinInt64:
		*n = math.MinInt64
	default:
		*n = flexInt(int64(f))
	}
	return nil
}

// budgetTotalWritten is the budgetTotal of manifest b as it is written, for a report: a string's text, a number's
// digits. NB: decoded as the manifest's field is (the same name, the last of several), but not as a number: flexInt
// holds one outside int64 at its bound, which the report would quote as the budget.
func budgetTotalWritten(b []byte) string {
	var m struct {
		BudgetTotal json.RawMessage `json:"budgetTotal"`
	}
	_ = json.Unmarshal(b, &m)
	var s string
	if json.Unmarshal(m.BudgetTotal, &s) == nil {
		return clip(s)
	}
	return clip(string(m.BudgetTotal))
}

// manifest is the part of TeamRunManifest (D§2.1) the import keeps.
type manifest struct {
	RunID           string   `json:"runId"`
	Team            string   `json:"team"`
	Workflow        string   `json:"workflow"`
	Goal            string   `json:"goal"`
	Status          string   `json:"status"`
	Cwd             string   `json:"cwd"`
	ArtifactsRoot   string   `json:"artifactsRoot"`
	CreatedAt       flexTime `json:"createdAt"`
	UpdatedAt       flexTime `json:"updatedAt"`
	BudgetTotal     flexInt  `json:"budgetTotal"`
	BudgetWarning   *float64 `json:"budgetWarning"`
	BudgetAbort     *float64 `json:"budgetAbort"`
	BudgetUnlimited bool     `json:"budgetUnlimited"`
}

// task is the part of TeamTaskState (D§2.3) the import keeps. StepID is a
// pointer because absent (a shadow, BR-09) differs from empty.
type task struct {
	ID           string          `json:"id"`
	RunID        string          `json:"runId"`
	StepID       *string         `json:"stepId"`
	Role         string          `json:"role"`
	Agent        string          `json:"agent"`
	Title        string          `json:"title"`
	Status       string          `json:"status"`
	Cwd          string          `json:"cwd"`
	DependsOn    []string        `json:"dependsOn"`
	StartedAt    flexTime        `json:"startedAt"`
	FinishedAt   flexTime        `json:"finishedAt"`
	Error        string          `json:"error"`
	FailureCause string          `json:"failureCause"`
	Model        string          `json:"model"`
	Depth        int             `json:"depth"`
	Allocation   *taskAllocation `json:"allocation"`
	Waiting      *taskWaiting    `json:"waiting"`
	Usage        *taskUsage      `json:"usage"`
}

// taskAllocation is a task's budget allocation in tasks.json.
type taskAllocation struct {
	TokensGranted int64 `json:"tokensGranted"`
	TokensSpent   int64 `json:"tokensSpent"`
}

// taskWaiting is the question a task of tasks.json waits on.
type taskWaiting struct {
	QuestionID string   `json:"questionId"`
	AskedAt    flexTime `json:"askedAt"`
	Deadline   flexTime `json:"deadline"`
	Options    []string `json:"options"`
}

// taskUsage is a task's usage in tasks.json.
type taskUsage struct {
	Input      int64   `json:"input"`
	Output     int64   `json:"output"`
	CacheRead  int64   `json:"cacheRead"`
	CacheWrite int64   `json:"cacheWrite"`
	Cost       float64 `json:"cost"`
	Turns      int64   `json:"turns"`
}

func (t *task) shadow() bool { return t.StepID == nil }

// teamEvent is one line of events.jsonl (D§3.1).
type teamEvent struct {
	Time     flexTime        `json:"time"`
	Type     string          `json:"type"`
	RunID    string          `json:"runId"`
	TaskID   string          `json:"taskId"`
	Message  string          `json:"message"`
	Data     json.RawMessage `json:"data"`
	Metadata struct {
		Seq uint64 `json:"seq"`
	} `json:"metadata"`
	line string // where it came from, for the report
	// delegate and delegateErr are Data decoded as a delegate.* event's (delegation), once decoded.
	delegate    *delegateData
	delegateErr error
}

// message is a MailboxMessage (D§2.6).
type message struct {
	ID           string   `json:"id"`
	RunID        string   `json:"runId"`
	Direction    string   `json:"direction"`
	From         string   `json:"from"`
	To           string   `json:"to"`
	Body         string   `json:"body"`
	CreatedAt    flexTime `json:"createdAt"`
	Status       string   `json:"status"`
	Kind         string   `json:"kind"`
	Priority     string   `json:"priority"`
	DeliveryMode string   `json:"deliveryMode"`
	TaskID       string   `json:"taskId"`
	QuestionID   string   `json:"questionId"`
	ReplyTo      string   `json:"replyTo"`
	Data         *struct {
		SubID     string `json:"subId"`
		OK        bool   `json:"ok"`
		TimedOut  bool   `json:"timedOut"`
		Cancelled bool   `json:"cancelled"`
	} `json:"data"`
	file   string // the mailbox file's task id ("" for the run-level files)
	outbox bool   // the mailbox file is an outbox (outbox.jsonl or one of its archives)
	rel    string // the mailbox file, for the report
	// bodySum is the SHA-256 of Body: what the planner keeps of it (planner.msgs).
	bodySum [sha256.Size]byte
}

// steer is one line of a steering file (D§2.7).
type steer struct {
	Type    string   `json:"type"`
	Message string   `json:"message"`
	ID      string   `json:"id"`
	TS      flexTime `json:"ts"`
	taskID  string
	rel     string // the steering file, for the report
	line    int
}

// run is everything read for one run.
type run struct {
	id       string
	manifest manifest
	tasks    []task
	events   []teamEvent // by seq, deduplicated
	messages []message   // deduplicated by id, in file order
	delivery map[string]string
	steers   []steer
}

// source reads a crew root and collects what it skips.
type source struct {
	root string
	// crew is what the root's files are opened through (files makes it at the first open).
	crew    *crewRoot
	skipped []Skipped
	// perFile counts the reports of each file (of a run) since the follower's last pass, or in the import
	// (maxReportsPerFile).
	perFile map[reportedFile]int
	// failed: a read of the run being read failed (readFailed), reported; its caller resets it before each run.
	failed bool
	// unread are the runs readRun left out for a read that failed.
	unread []string
}

// files is the crew root the files are opened through.
func (s *source) files() *crewRoot {
	if s.crew == nil {
		s.crew = &crewRoot{dir: s.root}
	}
	return s.crew
}

// unreadable reports err, an error reading the file or directory p of run id, with format (err its argument), and
// notes a read that failed (readFailed) in s.failed.
func (s *source) unreadable(id, p string, err error, format string) {
	s.failed = s.failed || readFailed(err)
	s.skip(id, s.rel(p), 0, 0, format, err)
}

// maxReason bounds a report's reason, in bytes. Many reasons name a value read from the files (a run id in a
// manifest, a task id, an event's type), which the run's workers write and which may be as long as a line; a report
// is kept (the follower's once-only set, Summary.Skipped) and logged (crewd's log), so its reason is cut at this
// length, far above the longest reason crewlog words itself (a few ids of at most eventlog.MaxIDLen bytes).
const maxReason = 1024

// maxReportsPerFile bounds the reports of one file of a run in one pass of a follower, or in one import: a file a
// run's workers write may hold millions of bad items (a 16 MiB delivery.json of states that are not strings, a
// JSONL file of broken lines), and every report is kept, logged by crewd and printed by crewctl. Past the bound one
// more report says that the file's other bad items go unreported, and they cost no report at all.
const maxReportsPerFile = 64

// reportedFile names a file of a run, for maxReportsPerFile.
type reportedFile struct{ run, path string }

func (s *source) skip(run, p string, line int, seq uint64, format string, args ...any) {
	path := printable(p)
	if s.perFile == nil {
		s.perFile = map[reportedFile]int{}
	}
	k := reportedFile{run, path}
	n := s.perFile[k]
	if n > maxReportsPerFile {
		return
	}
	s.perFile[k] = n + 1
	r := Skipped{Run: run, Path: path, Line: line, Seq: seq}
	if n == maxReportsPerFile {
		r.Line, r.Seq = 0, 0
		r.Reason = fmt.Sprintf("more than %d of this file's items were skipped: the others are not reported", n)
	} else {
		r.Reason = cutReason(printable(fmt.Sprintf(format, args...)))
	}
	s.skipped = append(s.skipped, r)
}

// printable is s with each control character, and each byte that is not UTF-8, as U+FFFD. A report names files and
// quotes values that a run's workers write, and crewctl prints it on the user's terminal, where a control character
// would act (an escape sequence moves the cursor, clears the screen, retitles the window) rather than show.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return utf8.RuneError
		}
		return r
	}, s)
}

// cutReason is reason cut to at most maxReason bytes, at a character's start, with "…" saying it was cut.
func cutReason(reason string) string {
	if len(reason) <= maxReason {
		return reason
	}
	// A cut within a character leaves the start of it at the end, which ToValidUTF8 drops.
	return strings.ToValidUTF8(reason[:maxReason-len("…")], "") + "…"
}

// rel is p relative to the root, slash-separated.
func (s *source) rel(p string) string {
	r, err := filepath.Rel(s.root, p)
	if err != nil {
		return filepath.ToSlash(p)
	}
	return filepath.ToSlash(r)
}

// runIDs lists the runs under state/runs, in run-id order, and reports what else is there. NB: the runs themselves
// are read one at a time (readRun), by their importer: a root holds thousands of runs, each with the archives of its
// compacted event log.
func (s *source) runIDs() ([]string, error) {
	dir := filepath.Join(s.root, "state", "runs")
	entries, err := readDir(s.files(), dir)
	if err != nil {
		return nil, fmt.Errorf("picrew: %s is not a pi-crew crew root: %w", s.root, err)
	}
	var ids []string
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if !e.IsDir() {
			s.skip("", s.rel(p), 0, 0, "%s", classify(e.Name(), "not a run directory"))
			continue
		}
		if !runIDPattern.MatchString(e.Name()) {
			s.skip("", s.rel(p), 0, 0, "directory name is not a pi-crew run id")
			continue
		}
		ids = append(ids, e.Name())
	}
	return ids, nil
}

// runDir is the directory of run id.
func (s *source) runDir(id string) string { return filepath.Join(s.root, "state", "runs", id) }

// runUnreadReason is the report of a run not imported because a read of one of its files failed (readFailed): what
// was read of it without that file is not the run, and a later import reads it again.
const runUnreadReason = "run not imported: a file or directory of it could not be read (reported): nothing " +
	"of it is recorded, a later import reads it again"

// tempReason is why a temporary file of an atomic write is left out.
const tempReason = "temporary file of an unfinished atomic write: ignored"

// classify names why a file that is not imported is left out.
func classify(name, otherwise string) string {
	switch {
	case strings.Contains(name, ".corrupt-"):
		return "quarantined by pi-crew (.corrupt-*): not imported"
	case name == "run.lock" || strings.HasSuffix(name, ".lock") || strings.HasSuffix(name, ".flock") ||
		strings.HasSuffix(name, ".mkdirlock") || strings.HasSuffix(name, ".alock") || strings.HasSuffix(name,
		".seqlock"):
		return "lock left behind by pi-crew: ignored"
	case strings.HasSuffix(name, ".seq") || strings.HasSuffix(name, ".gen"):
		return "event-log sidecar: ignored (seq is read from the events)"
	case strings.HasSuffix(name, ".tmp") || strings.Contains(name, ".tmp-"):
		return tempReason
	case name == "agents.json" || name == "agents" || name == "plans" || name == "active-run-index.json" ||
		name == "active-run-index.bin" || name == "heartbeat.json":
		return "derived view, rebuilt by crewlog's projections: not imported"
	}
	return otherwise
}

func (s *source) readRun(id, dir string) *run {
	s.failed = false
	r := &run{id: id, delivery: map[string]string{}}
	mp := filepath.Join(dir, "manifest.json")
	b, _, err := s.files().readFile(mp)
	if err == nil {
		r.manifest, err = s.parseManifest(id, s.rel(mp), b)
	}
	if err != nil {
		s.skip(id, s.rel(mp), 0, 0, "run not imported: manifest unreadable: %v", err)
		return nil
	}
	if r.manifest.RunID != "" && r.manifest.RunID != id {
		s.skip(id, s.rel(mp), 0, 0, "run not imported: manifest names run %q", r.manifest.RunID)
		return nil
	}
	tp := filepath.Join(dir, "tasks.json")
	if b, _, err := s.files().readFile(tp); err == nil {
		if r.tasks, err = s.parseTasks(id, s.rel(tp), b); err != nil {
			s.skip(id, s.rel(tp), 0, 0, tasksUndecodable, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		s.unreadable(id, tp, err, tasksNotReadReason(err))
	}

	var eventFiles, archives, mailFiles []string
	entries, err := readDir(s.files(), dir)
	if err != nil {
		s.unreadable(id, dir, pathless(err), "unreadable: %v")
	}
	strays := &strayEntries{s: s, run: id, dir: dir, what: "the run's directory"}
	for _, e := range entries {
		name, p := e.Name(), filepath.Join(dir, e.Name())
		switch {
		case name == "manifest.json" || name == "tasks.json":
		case name == "events.jsonl":
			eventFiles = append(eventFiles, p)
		case strings.HasPrefix(name, "events.jsonl.") && strings.HasSuffix(name, ".archive.jsonl"):
			archives = append(archives, p)
		case name == "mailbox" && e.IsDir():
			mailFiles, _ = s.mailboxFiles(id, p)
		default:
			strays.add(p, classify(name, "unknown file: not imported"))
		}
	}
	strays.done()
	eventFiles = append(eventFiles, firstRunFiles(archives, "event-log archives", func(reason string) {
		s.skip(id, s.rel(dir), 0, 0, "%s", reason)
	})...)
	r.events = s.readEvents(id, eventFiles)
	r.messages = s.readMessages(id, mailFiles, r.tasks)
	dp := filepath.Join(dir, "mailbox", "delivery.json")
	if b, _, err := s.files().readFile(dp); err == nil {
		msgIDs := make(map[string]bool, len(r.messages))
		for _, m := range r.messages {
			msgIDs[m.ID] = true
		}
		if d, _, ok := s.parseDelivery(id, s.rel(dp), b, func(msgID string) bool { return msgIDs[msgID] }); ok {
			r.delivery = d
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		s.unreadable(id, dp, err, deliveryUnreadable)
	}
	r.steers = s.readSteers(id)
	if s.failed {
		s.skip(id, s.rel(dir), 0, 0, "%s", runUnreadReason)
		s.unread = append(s.unread, id)
		return nil
	}
	return r
}

// parseManifest decodes the manifest rel of run id, reporting a field of another JSON type than pi-crew writes
// (taken as absent: decodeManifest), its damaged times, a budget run.create refuses (taken as absent: boundBudget)
// and an artifactsRoot that is not the run's own.
func (s *source) parseManifest(id, rel string, b []byte) (m manifest, err error) {
	mistyped, err := decodeManifest(b, &m)
	if err != nil {
		return m, err
	}
	for _, f := range mistyped {
		s.skip(id, rel, 0, 0, "%s", f.reason())
	}
	s.reportTimes(id, rel, 0, 0, "", "", &m)
	s.boundBudget(id, rel, b, &m)
	if !ownArtifacts(id, m.ArtifactsRoot) {
		s.skip(id, rel, 0, 0, "artifactsRoot names another directory than the run's own: ignored, steering files "+
			"are read from artifacts/%s", id)
	}
	return m, nil
}

// boundBudget takes a budget field of m that crewlog's own run.create refuses as absent, and reports it: a
// budgetTotal outside 0..events.MaxBudgetTotal (events.BudgetTotalOK: a JavaScript reader reads a larger one as
// another number, and a run's tasks' tokensGranted are seeded from it), a budgetWarning or budgetAbort outside [0,1]
// (events.BudgetFractionOK: a threshold no report reaches, or one every report does). b is the manifest, whose
// budgetTotal a report quotes as written (budgetTotalWritten).
func (s *source) boundBudget(id, rel string, b []byte, m *manifest) {
	if !events.BudgetTotalOK(int64(m.BudgetTotal)) {
		s.skip(id, rel, 0, 0, "budgetTotal %s is not 0..%d (crewlog's run.create): taken as absent",
			budgetTotalWritten(b), int64(events.MaxBudgetTotal))
		m.BudgetTotal = 0
	}
	for _, f := range []struct {
		name string
		v    **float64
	}{{"budgetWarning", &m.BudgetWarning}, {"budgetAbort", &m.BudgetAbort}} {
		if *f.v != nil && !events.BudgetFractionOK(**f.v) {
			s.skip(id, rel, 0, 0, "%s %g is not a fraction in [0,1] (crewlog's run.create): taken as absent",
				f.name, **f.v)
			*f.v = nil
		}
	}
}

// ownArtifacts reports whether a manifest's artifactsRoot names the run's
// own artifacts directory, artifacts/<runId> (D§1). NB: the value is never
// used, whatever it names: the manifest is rewritten by the run's workers,
// and a value naming another run's directory would import that run's
// steering files into this one. It is only checked, to report a value
// that would have read another directory: one ending in artifacts/<runId>
// is the run's own under another path of its root (a root copied or moved,
// or reached through a link), and no value at all is an older manifest's.
func ownArtifacts(id, v string) bool {
	if v == "" {
		return true
	}
	c := filepath.Clean(v)
	return filepath.Base(c) == id && filepath.Base(filepath.Dir(c)) == "artifacts"
}

// steeringDir is the directory of run id's steering files, always
// artifacts/<runId>/steering under the root (see ownArtifacts).
func (s *source) steeringDir(id string) string {
	return filepath.Join(s.root, "artifacts", id, "steering")
}

// steeringEntries lists the steering directory of run id. It and
// artifacts/<runId> must be directories: a symbolic link in place of
// either may name another run's (err, with the path to report; a missing
// one is fs.ErrNotExist, a run without steering).
func (s *source) steeringEntries(id string) (dir string, entries []os.DirEntry, bad string, err error) {
	dir = s.steeringDir(id)
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := s.files().realDir(d); err != nil {
			return dir, nil, d, err
		}
	}
	entries, err = readDir(s.files(), dir)
	return dir, entries, dir, pathless(err)
}

// tasksUndecodable is the report of a tasks.json that does not decode (parseTasks' err) read first, and
// tasksNotRead of one not read (not a regular file, larger than maxWholeFile: its error): the run then has no tasks.
// NB: a run's tasks come from its tasks.json only (a task.created line is not read, and a line naming a task
// tasks.json lacks is skipped), not from its events, as these said. tasksUnreadable is the report of one whose read
// failed (readFailed), which leaves the run not imported (runUnreadReason), not without tasks.
const (
	tasksUndecodable = "tasks.json does not decode, the run has no tasks (they come from tasks.json only): %v"
	tasksNotRead     = "tasks.json not read, the run has no tasks (they come from tasks.json only): %v"
	tasksUnreadable  = "tasks unreadable: %v"
)

// tasksNotReadReason is the report of the first read of a tasks.json that failed with err, not one of an absent file.
func tasksNotReadReason(err error) string {
	if readFailed(err) {
		return tasksUnreadable
	}
	return tasksNotRead
}

// parseTasks decodes tasks.json (rel) of run id in both forms pi-crew
// reads (D§1): a bare array, or the {schemaVersion, tasks} envelope. A
// record that is no object is reported and left out, a field of it of
// another JSON type than pi-crew writes taken as absent and reported
// (decodeTask); a file that does not decode is err, which its caller reports.
func (s *source) parseTasks(id, rel string, b []byte) ([]task, error) {
	records, err := taskRecords(b)
	if err != nil {
		return nil, err
	}
	// NB: room for the tasks kept only: a file of millions of records that are no tasks (`[1,1,…]`) had a task's
	// room made for each, 272 bytes a 2-byte record.
	var out []task
	seen := map[string]bool{}
	for i := 0; records.More(); i++ {
		// NB: each record on its own: each is written from what its worker reported, and one value a record cannot
		// hold (a fraction of a token) made the whole file undecodable, every other task of the run with it.
		var record json.RawMessage
		var t task
		err := records.Decode(&record)
		var mistyped []mistypedField
		if err == nil {
			mistyped, err = decodeTask(record, &t) // a field of another type costs the field only
		}
		if err != nil {
			s.skip(id, rel, 0, 0, "task %d does not decode: left out: %v", i, err)
			continue
		}
		switch {
		case t.RunID != "" && t.RunID != id:
			// NB: pi-crew names the run in every task record it writes (D§2.3, D§2.5: the manifest's runId, a
			// shadow's too): a record naming another is another run's, copied in by a worker of this one, and read as
			// this run's it recorded that run's task here, its status, usage and allocation with it, and under the id
			// of a task of this run read first it stood for that task. Checked first, so that such a record takes no
			// id from this run's own. A record naming no run is read as this one's, as for events and mailbox lines.
			s.skip(id, rel, 0, 0, "task %d (%s) names run %q, not this one: skipped", i, clip(t.ID), clip(t.RunID))
		case !runIDPattern.MatchString(t.ID):
			s.skip(id, rel, 0, 0, "task %d has an unusable id %q", i, t.ID)
		case events.TaskIDReserved(t.ID):
			// NB: crewd's import.append refuses it, as task.create does: a task so named is never sent a message.
			s.skip(id, rel, 0, 0, "task %d has the id %q, which names the run inbox, a group of tasks or the "+
				"orchestrator: left out", i, t.ID)
		case seen[t.ID]:
			s.skip(id, rel, 0, 0, "task %s appears twice: the first is kept", t.ID)
		default:
			for _, f := range mistyped {
				s.skip(id, rel, 0, 0, "task %s: %s", t.ID, f.reason())
			}
			if !events.DepthOK(t.Depth) {
				// NB: a shadow's depth decides whether it may be given a credential (credential.issue refuses one
				// at the depth limit) and how deep its own delegations are.
				s.skip(id, rel, 0, 0, "task %s: depth %d is not 0..%d (crewlog's task.create): taken as absent", t.ID,
					t.Depth, events.MaxDepth)
				t.Depth = 0
			}
			t.DependsOn = s.boundDependsOn(id, rel, t.ID, t.DependsOn)
			if a := t.Allocation; a != nil && (!events.BudgetTotalOK(a.TokensGranted) ||
				!events.SpendTokensOK(a.TokensSpent)) {
				// NB: it becomes an allocation top-up, a budget.reserved crewd's import.append refuses with a spend
				// above events.MaxUsageTokens, or a grant above events.MaxBudgetTotal (the budgetTotal a grant is
				// seeded from).
				s.skip(id, rel, 0, 0,
					"task %s: allocation of %d tokens granted, %d spent: a count below zero, a grant above %d or a "+
						"spend above %d, the allocation is left out", t.ID, a.TokensGranted, a.TokensSpent,
					int64(events.MaxBudgetTotal), int64(events.MaxUsageTokens))
				t.Allocation = nil
			}
			s.reportTimes(id, rel, 0, 0, "task "+t.ID+": ", "", &t)
			seen[t.ID] = true
			out = append(out, t)
		}
	}
	return out, nil
}

// taskRecords is a decoder of the records of tasks.json b (parseTasks), at its first, or the error of a file that
// does not decode. NB: one record at a time: decoded whole first, a 16 MiB file of millions of records held each
// record's bytes apart, and the slice of them, at once (a decoder of the array skips each record a type error leaves,
// as a decoding of it alone reports it). A file that does not decode, or whose records are not an array (null, or no
// tasks field, is no record), is decoded as before, for its error, which it meets before any record.
func taskRecords(b []byte) (*json.Decoder, error) {
	array, envelope := b, bytes.HasPrefix(bytes.TrimSpace(b), []byte("{"))
	if envelope {
		var env struct {
			Tasks json.RawMessage `json:"tasks"`
		}
		if err := json.Unmarshal(b, &env); err != nil {
			return nil, err
		}
		array = env.Tasks
	}
	if !bytes.HasPrefix(bytes.TrimSpace(array), []byte("[")) || !json.Valid(array) {
		var err error
		if envelope {
			var env struct {
				Tasks []json.RawMessage `json:"tasks"`
			}
			err = json.Unmarshal(b, &env)
		} else {
			err = json.Unmarshal(b, new([]json.RawMessage))
		}
		if err != nil {
			return nil, err
		}
		array = []byte("[]")
	}
	d := json.NewDecoder(bytes.NewReader(array))
	_, err := d.Token() // the array's [
	return d, err
}

// boundDependsOn is deps, the dependsOn of task taskID in tasks.json (rel) of run id, within what crewlog's
// task.create takes, each change reported: an id that is not 1..events.MaxIDChars chars (events.DependencyOK: it
// names no task) left out, then the ids past the first events.MaxDependsOn cut. NB: cut, not refused: the task is
// what the history needs, and crewd's import.append refuses a longer list, which every read of the task copies.
func (s *source) boundDependsOn(id, rel, taskID string, deps []string) []string {
	kept := slices.DeleteFunc(deps, func(d string) bool { return !events.DependencyOK(d) })
	if n := len(deps) - len(kept); n > 0 {
		s.skip(id, rel, 0, 0, "task %s: dependsOn holds %d ids that are not 1..%d chars (no task has one): left out",
			taskID, n, events.MaxIDChars)
	}
	if !events.DependsOnCountOK(kept) {
		s.skip(id, rel, 0, 0,
			"task %s: dependsOn lists %d tasks, more than %d (crewlog's task.create): the first %d are kept", taskID,
			len(kept), events.MaxDependsOn, events.MaxDependsOn)
		kept = kept[:events.MaxDependsOn]
	}
	return kept
}

// readEvents merges the archives and the live log by seq, like pi-crew's
// readEvents, reporting corrupt lines, events without a seq, conflicting
// duplicates and gaps.
func (s *source) readEvents(id string, files []string) []teamEvent {
	sort.Strings(files) // archives (events.jsonl.<ts>.archive.jsonl) sort after the live file; order is by seq anyway
	bySeq := map[uint64]teamEvent{}
	for _, f := range files {
		s.readLines(id, f, func(line int, b []byte) {
			ev, ok := s.parseEvent(id, s.rel(f), line, b)
			if !ok {
				return
			}
			if old, dup := bySeq[ev.Metadata.Seq]; dup {
				if old.Type != ev.Type || old.TaskID != ev.TaskID || !bytes.Equal(old.Data, ev.Data) {
					s.skip(id, s.rel(f), line, ev.Metadata.Seq,
						"seq already used by %s (%s) for another event: skipped", old.Type, old.line)
				}
				return
			}
			bySeq[ev.Metadata.Seq] = ev
		})
	}
	out := make([]teamEvent, 0, len(bySeq))
	for _, ev := range bySeq {
		out = append(out, ev)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Metadata.Seq < out[j].Metadata.Seq })
	var prev uint64
	for _, ev := range out {
		if seq := ev.Metadata.Seq; seq > prev+1 {
			s.skip(id, path.Join("state/runs", id, "events.jsonl"), 0, prev+1,
				"seq %d..%d missing (compacted or a failed append): the files supply the end state", prev+1, seq-1)
		}
		prev = ev.Metadata.Seq
	}
	return out
}

// parseEvent decodes one events.jsonl line; a corrupt line or one without
// a seq is reported and ok is false.
func (s *source) parseEvent(id, rel string, line int, b []byte) (ev teamEvent, ok bool) {
	if err := json.Unmarshal(b, &ev); err != nil || ev.Type == "" {
		s.skip(id, rel, line, 0, "corrupt event line: skipped")
		return ev, false
	}
	ev.line = fmt.Sprintf("%s:%d", rel, line)
	if ev.RunID != "" && ev.RunID != id {
		// NB: pi-crew names the run in every line it appends (D§3.1, an event is its runId and seq): a line naming
		// another is another run's, copied in by a worker of this one, and read as this run's it recorded that run's
		// delegations, questions and ends here. A line naming no run is read as this one's, as the import always has.
		s.skip(id, rel, line, ev.Metadata.Seq, "event %s names run %q, not this one: skipped", clip(ev.Type),
			clip(ev.RunID))
		return ev, false
	}
	if ev.Metadata.Seq == 0 {
		s.skip(id, rel, line, 0, "event %s has no metadata.seq: skipped", ev.Type)
		return ev, false
	}
	if ev.Metadata.Seq > math.MaxInt64 {
		// NB: a foreign.imported keeps the seq as an int64, which one past it wrapped to a negative seq: a pi-crew
		// client reading its own event back read another one.
		s.skip(id, rel, line, ev.Metadata.Seq, "event %s: seq is past what crewlog records (at most %d): skipped",
			ev.Type, int64(math.MaxInt64))
		return ev, false
	}
	s.reportTimes(id, rel, line, ev.Metadata.Seq, "", "", &ev)
	return ev, true
}

// readLines calls fn for each non-empty line of p. A line longer than maxLine bytes is reported and skipped to its
// newline, and the lines after it are read. NB: skipped, not the end of the file: one line a run's worker appends
// would otherwise hide every later line of its file, which a follower, skipping a line longer than one read, imports.
func (s *source) readLines(id, p string, fn func(line int, b []byte)) {
	f, _, err := s.files().openFile(p)
	if err != nil {
		s.unreadable(id, p, err, "unreadable: %v")
		return
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	var text []byte // the line read so far, nil once it is longer than maxLine
	long := false
	for n := 1; ; {
		chunk, err := r.ReadSlice('\n')
		if !long && len(text)+len(bytes.TrimSuffix(chunk, []byte("\n"))) > maxLine {
			long, text = true, nil
		} else if !long {
			text = append(text, chunk...)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue // the line goes on
		case err != nil && !errors.Is(err, io.EOF):
			// NB: the read's failure (readFailed), not the file's content.
			s.failed = true
			s.skip(id, s.rel(p), n, 0, "rest of the file unreadable: %v", pathless(err))
			return
		case err != nil && len(text) == 0 && !long:
			return // the end of the file, after a newline
		}
		if long {
			s.skip(id, s.rel(p), n, 0, "line longer than %d bytes: skipped", maxLine)
		} else if b := bytes.TrimSpace(text); len(b) > 0 {
			fn(n, b)
		}
		if err != nil {
			return // a last line without its newline, read as the lines before it
		}
		n, text, long = n+1, text[:0], false
	}
}

// mailboxFiles lists the mailbox JSONL files of a run (run-level and
// per-task, live and archived) and reports everything else in mailbox/.
// complete is false when a listing failed (readFailed): files may be
// missing from the list, not from the mailbox.
func (s *source) mailboxFiles(id, dir string) (out []string, complete bool) {
	isMail := func(name string) bool {
		for _, d := range []string{"inbox.jsonl", "outbox.jsonl"} {
			if name == d || (strings.HasPrefix(name, d+".") && strings.HasSuffix(name, ".archive.jsonl")) {
				return true
			}
		}
		return false
	}
	complete = true
	strays := &strayEntries{s: s, run: id, dir: dir, what: "the run's mailbox directories"}
	list := func(dir string) []os.DirEntry {
		entries, err := readDir(s.files(), dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			complete = complete && !readFailed(err)
			s.unreadable(id, dir, pathless(err), "unreadable: %v")
		}
		return entries
	}
	for _, e := range list(dir) {
		name, p := e.Name(), filepath.Join(dir, e.Name())
		switch {
		case name == "delivery.json":
		case isMail(name) && !e.IsDir():
			out = append(out, p)
		case name == "tasks" && e.IsDir():
			for _, t := range list(p) {
				tp := filepath.Join(p, t.Name())
				if !t.IsDir() || !runIDPattern.MatchString(t.Name()) {
					strays.add(tp, classify(t.Name(), "not a task mailbox: not imported"))
					continue
				}
				if events.TaskIDReserved(t.Name()) {
					strays.add(tp, reservedTaskFile("task mailbox", t.Name()))
					continue
				}
				for _, f := range list(tp) {
					fp := filepath.Join(tp, f.Name())
					if isMail(f.Name()) && !f.IsDir() {
						out = append(out, fp)
					} else {
						strays.add(fp, classify(f.Name(), "unknown mailbox file: not imported"))
					}
				}
			}
		default:
			strays.add(p, classify(name, "unknown mailbox file: not imported"))
		}
	}
	strays.done()
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(mailboxOrder(a), mailboxOrder(b)) })
	return firstRunFiles(out, "mailbox files", func(reason string) { s.skip(id, s.rel(dir), 0, 0, "%s", reason) }),
		complete
}

// reservedTaskFile is the report of a task mailbox directory or a steering file (what) named for taskID, a word no
// task is named (events.TaskIDReserved), as a task of tasks.json so named is left out. NB: read, its messages went to
// a mailbox under that name, which no task reads and msg.send reads as a group of mailboxes (or the orchestrator's).
func reservedTaskFile(what, taskID string) string {
	return fmt.Sprintf("a %s of %q, which names the run inbox, a group of tasks or the orchestrator: not imported",
		what, taskID)
}

// taskNamed reports whether name, a task mailbox directory's or a steering file's task id, is one a task of a run
// may have: of pi-crew's charset (runIDPattern), and no word no task is named (events.TaskIDReserved).
func taskNamed(name string) bool {
	return runIDPattern.MatchString(name) && !events.TaskIDReserved(name)
}

// mailboxOrder is the key mailbox files are read in: by name, but each live file (inbox.jsonl, outbox.jsonl) after
// its archives (<file>.<ts>.archive.jsonl). NB: an archive holds the file's older lines, some of which a follower may
// not have read before the rotation; read after the live file, the newer messages were recorded before them.
// Mailbox files have no takeover of the live file's position by its archive, as events.jsonl's have: the archive is
// read from its start (its messages read before are known, or their command ids keep them from doubling), then the
// live file.
func mailboxOrder(p string) string {
	if liveMailboxFile(filepath.Base(p)) {
		return p + ".\xff" // after every <file>.<ts>.archive.jsonl of the same directory
	}
	return p
}

// liveMailboxFile reports whether name is a mailbox's live file, the one pi-crew appends to and rotates to archives:
// inbox.jsonl or outbox.jsonl.
func liveMailboxFile(name string) bool {
	return name == "inbox.jsonl" || name == "outbox.jsonl"
}

// readMessages reads the mailbox files of run id, whose tasks.json holds tasks: each message once, the first line
// of its id standing (messageAgain), a line of the inbox of a task tasks.json lacks skipped (inboxOfNoTask) first.
func (s *source) readMessages(id string, files []string, tasks []task) []message {
	has := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		has[t.ID] = true
	}
	var out []message
	seen := map[string]int{} // message id → its index in out
	for _, f := range files {
		s.readLines(id, f, func(line int, b []byte) {
			m, ok := s.parseMessage(id, s.rel(f), line, b)
			if !ok || s.inboxOfNoTask(id, line, m, has[recipient(m)]) {
				return
			}
			if i, dup := seen[m.ID]; dup {
				s.messageAgain(id, line, out[i], m)
				return
			}
			seen[m.ID] = len(out)
			out = append(out, m)
		})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.ms < out[j].CreatedAt.ms })
	return out
}

// inboxOfNoTask reports whether m, a message of line line of run id, is in the inbox of a task tasks.json lacks
// (known: tasks.json has the task of its mailbox), and reports it so: it is then skipped. NB: crewlog's msg.send
// appends to the mailbox of a task of its run or to the run's inbox, and pi-crew's broker writes the inbox of a task
// it found in tasks.json; recorded, the message, and its delivery states, were in the mailbox of a task the run does
// not have. Skipped before its id is taken (messageAgain), as a line of no message is: a line of a task of
// tasks.json under its id is the message. The run's inbox and the outboxes (the run's inbox too: recipient) are no
// task's.
func (s *source) inboxOfNoTask(id string, line int, m message, known bool) bool {
	to := recipient(m)
	if to == events.RunInbox || known {
		return false
	}
	s.skip(id, m.rel, line, 0, "message %s is in the inbox of task %q, not a task of tasks.json: skipped", clip(m.ID),
		clip(to))
	return true
}

// messageAgain reports m, a message of line line of run id under the id of first, read before it, unless it is the
// same message (its mailbox, sender and body): a compacted file's archive holds the lines it held. NB: a message id
// is its run's one message (pi-crew's M1), and the first one read stands: a line of one mailbox file under the id of
// another's message (a line a run's worker wrote) would otherwise leave that message out without a line saying so.
func (s *source) messageAgain(id string, line int, first, m message) {
	if recipient(first) != recipient(m) || first.From != m.From || first.bodySum != m.bodySum {
		s.skip(id, m.rel, line, 0, "message %s: a message of that id is in %s already, in another mailbox or with "+
			"another body: skipped (a message id is its run's one message)", clip(m.ID), first.rel)
	}
}

// parseMessage decodes one mailbox line of the file rel; a corrupt line, or one naming another run than id, is
// reported and ok is false.
func (s *source) parseMessage(id, rel string, line int, b []byte) (m message, ok bool) {
	if err := json.Unmarshal(b, &m); err != nil || m.ID == "" {
		s.skip(id, rel, line, 0, "corrupt mailbox line: skipped")
		return m, false
	}
	if !events.ImportedIDOK(m.ID) {
		// NB: not taken as absent, as another of its ids is: the id is the message (its delivery state, its
		// acknowledgement and a second line of it name it so), and crewd's import.append refuses it.
		s.skip(id, rel, line, 0, "message %s: its id is longer than %s, as no id crewlog records: skipped",
			clip(m.ID), importedIDBound)
		return m, false
	}
	if m.RunID != "" && m.RunID != id {
		// NB: pi-crew names the run in every line it appends (D§2.6, the manifest's runId, which its own reader
		// requires): a line naming another is another run's, copied in by a worker of this one, and read as this
		// run's it recorded that run's message here, delivered or acknowledged as this run's delivery.json says of
		// its id. Skipped, its id is no message of this run: a delivery state under it records nothing (delivery),
		// and a steering line under it gets a message of its own (steer). A line naming no run is read as this one's,
		// as for events: a worker who can strip the name can as well write this run's.
		s.skip(id, rel, line, 0, "message %s names run %q, not this one: skipped", clip(m.ID), clip(m.RunID))
		return m, false
	}
	parts := strings.Split(rel, "/")
	if len(parts) >= 3 && parts[len(parts)-3] == "tasks" {
		m.file = parts[len(parts)-2]
	}
	m.outbox = strings.HasPrefix(parts[len(parts)-1], "outbox.jsonl")
	m.rel, m.bodySum = rel, sha256.Sum256([]byte(m.Body))
	if to, named := lineMailbox(m); named && to != recipient(m) {
		s.skip(id, rel, line, 0, "message %s: its line names mailbox %q (direction %s): recorded in its file's, %s",
			clip(m.ID), clip(to), clip(firstOf(m.Direction, "inbox")), mailboxName(recipient(m)))
	}
	s.boundMessageIDs(id, rel, line, &m)
	s.boundMessageWords(id, rel, line, &m)
	s.reportTimes(id, rel, line, 0, "message "+clip(m.ID)+": ", "", &m)
	return m, true
}

// boundMessageIDs takes an id of message m (a line of the mailbox file rel) longer than any id crewlog records
// (events.ImportedIDOK) as absent, and reports it: its questionId, and its data's subId. NB: the message is kept, as
// its body is what the history needs; crewd's import.append refuses such an id, which the message would carry in
// every read and snapshot of its run.
func (s *source) boundMessageIDs(id, rel string, line int, m *message) {
	bound := func(name string, v *string) {
		if !events.ImportedIDOK(*v) {
			s.skip(id, rel, line, 0, "message %s: %s %s is longer than %s, as no id crewlog records: taken as absent",
				clip(m.ID), name, clip(*v), importedIDBound)
			*v = ""
		}
	}
	bound("questionId", &m.QuestionID)
	if m.Data != nil {
		bound("data.subId", &m.Data.SubID)
	}
}

// boundMessageWords takes a kind, priority or deliveryMode of message m (a line of the mailbox file rel) that is none
// of the words pi-crew writes (events.MessageKindOK, PriorityOK and DeliveryModeOK) as absent, the default the plan
// gives it, and reports it. NB: a worker can write its own line, and nothing else bounds the word, which every read
// of the message copies: one of 60,000 '<' left msg.inbox answering oversize-frame at the message for good, whatever
// the frame.
func (s *source) boundMessageWords(id, rel string, line int, m *message) {
	for _, w := range events.MessageWords(&m.Kind, &m.Priority, &m.DeliveryMode) {
		if !w.OK(*w.Value) {
			s.skip(id, rel, line, 0, "message %s: %s %s is not one pi-crew writes: taken as absent",
				clip(m.ID), w.Name, clip(*w.Value))
			*w.Value = ""
		}
	}
}

// lineMailbox is the mailbox a message's line names (its direction outbox: the run's inbox, which the orchestrator
// reads; else its taskId), and whether it names one at all.
func lineMailbox(m message) (to string, named bool) {
	switch {
	case m.Direction == "outbox":
		return events.RunInbox, true
	case m.TaskID != "":
		return m.TaskID, true
	}
	return "", false
}

// mailboxName is recipient to, for a report.
func mailboxName(to string) string {
	if to == events.RunInbox {
		return "the run's inbox"
	}
	return to
}

// parseSteer decodes one line of the steering file rel of task taskID; a
// corrupt line is reported and ok is false.
func (s *source) parseSteer(id, rel, taskID string, line int, b []byte) (st steer, ok bool) {
	if err := json.Unmarshal(b, &st); err != nil || st.Message == "" {
		s.skip(id, rel, line, 0, "corrupt steering line: skipped")
		return st, false
	}
	st.taskID, st.rel, st.line = taskID, rel, line
	s.reportTimes(id, rel, line, 0, "", "", &st)
	return st, true
}

func (s *source) readSteers(id string) []steer {
	dir, entries, bad, err := s.steeringEntries(id)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.unreadable(id, bad, err, "steering files not read: %v")
		}
		return nil
	}
	var files []string
	strays := &strayEntries{s: s, run: id, dir: dir, what: "the run's steering directory"}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		taskID, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if e.IsDir() || !ok || !runIDPattern.MatchString(taskID) {
			strays.add(p, classify(e.Name(), "not a steering file: not imported"))
			continue
		}
		if events.TaskIDReserved(taskID) {
			strays.add(p, reservedTaskFile("steering file", taskID))
			continue
		}
		files = append(files, p)
	}
	strays.done()
	var out []steer
	for _, p := range firstRunFiles(files, "steering files", func(reason string) {
		s.skip(id, s.rel(dir), 0, 0, "%s", reason)
	}) {
		taskID := strings.TrimSuffix(filepath.Base(p), ".jsonl")
		s.readLines(id, p, func(line int, b []byte) {
			if st, ok := s.parseSteer(id, s.rel(p), taskID, line, b); ok {
				out = append(out, st)
			}
		})
	}
	return out
}
