package projections

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/crewlog/crewlog/events"
)

// The first query of a finished run decodes the run's view (coldview.go),
// and msgpack's reflection decoder spent most of that on the bulk of a long
// run: tasks, delegations, ledger accounts and messages, each field looked
// up by name through reflection. decodeSnapshotRun reads those four field
// by field, the mirror of appendSnapshotRun (snapshot_codec.go); the rare
// records (the run's own record, asks, credentials, jobs, revoked roots, a
// task's allocation and waiting marker when not nil) are handed to
// reflection as the bytes of their value; a message's data, one per
// settled delegation, is read field by field too.
//
// NB: it decodes into exactly what reflection decodes for the bytes
// appendSnapshotRun writes (a nil slice stays nil, an empty one empty).
// Anything else — a key it does not know, a value of an unexpected msgpack
// type — is errFastFallback, and the caller decodes the view by reflection
// instead, so the fast path never decides what a view means.
// TestSnapshotRunFastDecodeMatchesReflection compares the two on whole runs
// and on every record filled at random; a field added to one of these
// structs fails it until it is read here too. It reads any bytes without a
// panic, and allocates for a declared length only as far as the bytes left
// can back it (what checkMsgpack guarantees reflection), so it runs before
// that check, which only the fallback needs.

var errFastFallback = errors.New("projections: view not decoded by the fast path")

// viewReader reads msgpack that checkMsgpack has checked. On the first
// problem it sets bad and every later read returns a zero value, so the
// decoders check once, at the end (loops check ok to stop early).
type viewReader struct {
	b   []byte
	i   int
	bad bool
}

func (r *viewReader) ok() bool { return !r.bad }

func (r *viewReader) fail() { r.bad = true }

func (r *viewReader) take(n int) []byte {
	if r.bad || n < 0 || n > len(r.b)-r.i {
		r.bad = true
		return nil
	}
	p := r.b[r.i : r.i+n]
	r.i += n
	return p
}

func (r *viewReader) code() byte {
	p := r.take(1)
	if p == nil {
		return 0xc1 // never used: every caller fails on it
	}
	return p[0]
}

// nilNext consumes a nil and reports whether there was one.
func (r *viewReader) nilNext() bool {
	if !r.bad && r.i < len(r.b) && r.b[r.i] == 0xc0 {
		r.i++
		return true
	}
	return false
}

func (r *viewReader) uint(n int) uint64 {
	p := r.take(n)
	switch {
	case p == nil:
		return 0
	case n == 1:
		return uint64(p[0])
	case n == 2:
		return uint64(binary.BigEndian.Uint16(p))
	case n == 4:
		return uint64(binary.BigEndian.Uint32(p))
	}
	return binary.BigEndian.Uint64(p)
}

// mapLen reads a map header.
func (r *viewReader) mapLen() int {
	switch c := r.code(); {
	case c >= 0x80 && c <= 0x8f:
		return int(c & 0x0f)
	case c == 0xde:
		return int(r.uint(2))
	case c == 0xdf:
		return int(r.uint(4))
	}
	r.fail()
	return 0
}

// arrayLen reads an array header, or a nil (-1). A length that more
// elements than bytes remain could back fails: callers allocate from it.
func (r *viewReader) arrayLen() int {
	n := 0
	switch c := r.code(); {
	case c == 0xc0:
		return -1
	case c >= 0x90 && c <= 0x9f:
		n = int(c & 0x0f)
	case c == 0xdc:
		n = int(r.uint(2))
	case c == 0xdd:
		n = int(r.uint(4))
	default:
		r.fail()
	}
	if n > len(r.b)-r.i {
		r.fail()
		return 0
	}
	return n
}

// key reads a map key without copying it (it is only compared).
func (r *viewReader) key() []byte {
	return r.take(r.strLen())
}

func (r *viewReader) strLen() int {
	switch c := r.code(); {
	case c >= 0xa0 && c <= 0xbf:
		return int(c & 0x1f)
	case c == 0xd9:
		return int(r.uint(1))
	case c == 0xda:
		return int(r.uint(2))
	case c == 0xdb:
		return int(r.uint(4))
	}
	r.fail()
	return 0
}

func (r *viewReader) str() string {
	if r.nilNext() {
		return ""
	}
	return string(r.take(r.strLen()))
}

func (r *viewReader) int() int64 {
	c := r.code()
	switch {
	case c <= 0x7f:
		return int64(c)
	case c >= 0xe0:
		return int64(int8(c))
	case c >= 0xcc && c <= 0xcf:
		v := r.uint(1 << (c - 0xcc))
		if v > math.MaxInt64 {
			r.fail()
		}
		return int64(v)
	case c >= 0xd0 && c <= 0xd3:
		n := 1 << (c - 0xd0)
		v := r.uint(n)
		switch n {
		case 1:
			return int64(int8(v))
		case 2:
			return int64(int16(v))
		case 4:
			return int64(int32(v))
		}
		return int64(v)
	}
	r.fail()
	return 0
}

func (r *viewReader) uint64() uint64 {
	c := r.code()
	switch {
	case c <= 0x7f:
		return uint64(c)
	case c >= 0xcc && c <= 0xcf:
		return r.uint(1 << (c - 0xcc))
	}
	r.fail()
	return 0
}

func (r *viewReader) float() float64 {
	switch r.code() {
	case 0xcb:
		return math.Float64frombits(r.uint(8))
	case 0xca:
		return float64(math.Float32frombits(uint32(r.uint(4))))
	}
	r.fail()
	return 0
}

func (r *viewReader) bool() bool {
	switch r.code() {
	case 0xc2:
		return false
	case 0xc3:
		return true
	}
	r.fail()
	return false
}

func (r *viewReader) strs() []string {
	n := r.arrayLen()
	if n < 0 || r.bad {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = r.str()
	}
	return out
}

// reflected decodes the next value into v by reflection. A nil is
// consumed without it: v points to a zero value (every caller decodes into
// a record it has just made), which is what reflection leaves for a nil,
// and most tasks' waiting markers are nil.
func (r *viewReader) reflected(v any) {
	if r.bad || r.nilNext() {
		return
	}
	end, err := msgpackEnd(r.b, r.i, 1)
	if err != nil || msgpack.Unmarshal(r.b[r.i:end], v) != nil {
		r.fail()
		return
	}
	r.i = end
}

// readMessageData reads a message's data: one per settled delegation's
// result message, so decoded field by field rather than by reflection.
func readMessageData(r *viewReader) *events.MessageData {
	if r.nilNext() {
		return nil
	}
	d := new(events.MessageData)
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "subId":
			d.SubID = r.str()
		case "ok":
			d.OK = r.bool()
		case "timedOut":
			d.TimedOut = r.bool()
		case "cancelled":
			d.Cancelled = r.bool()
		default:
			r.fail()
		}
	}
	return d
}

// decodeSnapshotFields decodes a whole snapshot (appendSnapshot's bytes,
// after the format) from b, or returns errFastFallback: its head (the
// config and the ordinals by reflection), then every run as
// decodeSnapshotRun reads one. A start-up decodes the snapshot, and a long
// busy run in it holds tens of thousands of records.
func decodeSnapshotFields(b []byte) (*snapshot, error) {
	r := &viewReader{b: b}
	var snap snapshot
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "position":
			snap.Position = r.uint64()
		case "config":
			r.reflected(&snap.Config)
		case "runCount":
			snap.RunCount = int(r.int())
		case "ords":
			r.reflected(&snap.Ords)
		case "missingViews":
			snap.MissingViews = r.strs()
		case "runs":
			// NB: an element takes at least a byte, so the length is
			// backed by the bytes left (arrayLen checks it) before the
			// runs are allocated.
			if k := r.arrayLen(); k >= 0 && r.ok() {
				snap.Runs = make([]snapshotRun, k)
				for i := 0; i < k && r.ok(); i++ {
					readSnapshotRun(r, &snap.Runs[i])
				}
			}
		default:
			r.fail()
		}
	}
	if r.bad || r.i != len(b) {
		return nil, errFastFallback
	}
	return &snap, nil
}

// decodeSnapshotRun decodes one run of a snapshot (appendSnapshotRun's
// bytes) from b, or returns errFastFallback.
func decodeSnapshotRun(b []byte) (*snapshotRun, error) {
	r := &viewReader{b: b}
	var sr snapshotRun
	readSnapshotRun(r, &sr)
	if r.bad || r.i != len(b) {
		return nil, errFastFallback
	}
	return &sr, nil
}

// readSnapshotRun reads one run's map into sr.
func readSnapshotRun(r *viewReader, sr *snapshotRun) {
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "run":
			r.reflected(&sr.Run)
		case "last":
			sr.Last = r.uint64()
		case "cold":
			sr.Cold = r.bool()
		case "tasks":
			sr.Tasks = readRecords(r, readTask)
		case "delegations":
			sr.Delegations = readRecords(r, readDelegation)
		case "accounts":
			sr.Accounts = readRecords(r, readAccount)
		case "messages":
			if k := r.arrayLen(); k >= 0 && k <= (len(r.b)-r.i)/minRecordBytes+1 && r.ok() {
				sr.Messages = make([]Message, k)
				for i := range sr.Messages {
					readMessage(r, &sr.Messages[i])
				}
			}
		case "asks":
			r.reflected(&sr.Asks)
		case "credentials":
			r.reflected(&sr.Credentials)
		case "rootSpent":
			sr.RootSpent = r.int()
		case "jobs":
			r.reflected(&sr.Jobs)
		case "revokedRoots":
			r.reflected(&sr.RevokedRoots)
		case "noView":
			sr.NoView = r.bool()
		default:
			r.fail()
		}
	}
}

// minRecordBytes is less than any record's encoding takes (its map header
// and a key or two): it bounds the block readRecords allocates up front.
const minRecordBytes = 16

// readRecords reads an array of pointers to records (nil elements kept),
// the records allocated in one block as far as the bytes left can back
// them.
func readRecords[T any](r *viewReader, read func(*viewReader, *T)) []*T {
	n := r.arrayLen()
	if n < 0 || r.bad {
		return nil
	}
	out := make([]*T, n)
	recs := make([]T, 0, min(n, (len(r.b)-r.i)/minRecordBytes))
	for i := range out {
		if r.nilNext() {
			continue
		}
		var rec *T
		if len(recs) < cap(recs) {
			recs = recs[:len(recs)+1] // NB: within its capacity, so earlier records do not move
			rec = &recs[len(recs)-1]
		} else {
			rec = new(T)
		}
		read(r, rec)
		out[i] = rec
		if !r.ok() {
			return nil
		}
	}
	return out
}

func readTask(r *viewReader, t *Task) {
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "runId":
			t.RunID = r.str()
		case "id":
			t.TaskID = r.str()
		case "kind":
			t.Kind = r.str()
		case "stepId":
			t.StepID = r.str()
		case "role":
			t.Role = r.str()
		case "agent":
			t.Agent = r.str()
		case "title":
			t.Title = r.str()
		case "status":
			t.Status = TaskStatus(r.str())
		case "cwd":
			t.Cwd = r.str()
		case "dependsOn":
			t.DependsOn = r.strs()
		case "depth":
			t.Depth = int(r.int())
		case "model":
			t.Model = r.str()
		case "allocation":
			r.reflected(&t.Allocation)
		case "waiting":
			r.reflected(&t.Waiting)
		case "usage":
			readUsage(r, &t.Usage)
		case "error":
			t.Error = r.str()
		case "failureCause":
			t.FailureCause = r.str()
		case "statusReason":
			t.StatusReason = r.str()
		case "retries":
			t.Retries = int(r.int())
		case "createdAt":
			t.CreatedAt = r.int()
		case "startedAt":
			t.StartedAt = r.int()
		case "finishedAt":
			t.FinishedAt = r.int()
		default:
			r.fail()
		}
	}
}

func readUsage(r *viewReader, u *Usage) {
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "input":
			u.Input = r.int()
		case "output":
			u.Output = r.int()
		case "cacheRead":
			u.CacheRead = r.int()
		case "cacheWrite":
			u.CacheWrite = r.int()
		case "cost":
			u.Cost = r.float()
		case "turns":
			u.Turns = r.int()
		default:
			r.fail()
		}
	}
}

func readDelegation(r *viewReader, d *Delegation) {
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "runId":
			d.RunID = r.str()
		case "subId":
			d.SubID = r.str()
		case "parentTaskId":
			d.ParentTaskID = r.str()
		case "role":
			d.Role = r.str()
		case "depth":
			d.Depth = int(r.int())
		case "model":
			d.Model = r.str()
		case "timeoutSec":
			d.TimeoutSec = r.float()
		case "deadline":
			d.Deadline = r.int()
		case "cwd":
			d.Cwd = r.str()
		case "title":
			d.Title = r.str()
		case "metered":
			d.Metered = r.bool()
		case "reservedTokens":
			d.Reserved = r.int()
		case "status":
			d.Status = DelegationStatus(r.str())
		case "cancelRequested":
			d.CancelRequested = r.bool()
		case "pid":
			d.PID = int(r.int())
		case "admittedAt":
			d.AdmittedAt = r.int()
		case "settledAt":
			d.SettledAt = r.int()
		case "admittedPosition":
			d.AdmittedPosition = r.uint64()
		case "ok":
			d.OK = r.bool()
		case "usageTokens":
			d.UsageTokens = r.int()
		case "expired":
			d.Expired = r.bool()
		case "messageId":
			d.MessageID = r.str()
		default:
			r.fail()
		}
	}
}

func readAccount(r *viewReader, a *Account) {
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "runId":
			a.RunID = r.str()
		case "taskId":
			a.TaskID = r.str()
		case "tokensGranted":
			a.TokensGranted = r.int()
		case "tokensSpent":
			a.TokensSpent = r.int()
		case "reserved":
			a.Reserved = r.int()
		case "charged":
			a.Charged = r.int()
		case "reservations":
			if k := r.arrayLen(); k >= 0 && r.ok() {
				a.Reservations = make([]Reservation, k)
				for i := range a.Reservations {
					readReservation(r, &a.Reservations[i])
				}
			}
		case "charges":
			if k := r.arrayLen(); k >= 0 && r.ok() {
				a.Charges = make([]Charge, k)
				for i := range a.Charges {
					readCharge(r, &a.Charges[i])
				}
			}
		default:
			r.fail()
		}
	}
}

func readReservation(r *viewReader, v *Reservation) {
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "subId":
			v.SubID = r.str()
		case "tokens":
			v.Tokens = r.int()
		case "at":
			v.At = r.int()
		default:
			r.fail()
		}
	}
}

func readCharge(r *viewReader, c *Charge) {
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "subId":
			c.SubID = r.str()
		case "tokens":
			c.Tokens = r.int()
		case "usageTokens":
			c.UsageTokens = r.int()
		case "reservedTokens":
			c.ReservedTokens = r.int()
		case "at":
			c.At = r.int()
		default:
			r.fail()
		}
	}
}

func readMessage(r *viewReader, m *Message) {
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "runId":
			m.RunID = r.str()
		case "id":
			m.ID = r.str()
		case "to":
			m.To = r.str()
		case "from":
			m.From = r.str()
		case "kind":
			m.Kind = r.str()
		case "priority":
			m.Priority = r.str()
		case "deliveryMode":
			m.DeliveryMode = r.str()
		case "body":
			m.Body = r.str()
		case "subject":
			m.Subject = r.str()
		case "questionId":
			m.QuestionID = r.str()
		case "replyTo":
			m.ReplyTo = r.str()
		case "rerouted":
			m.Rerouted = r.bool()
		case "data":
			m.Data = readMessageData(r)
		case "status":
			m.Status = MessageStatus(r.str())
		case "createdAt":
			m.CreatedAt = r.int()
		case "deliveredAt":
			m.DeliveredAt = r.int()
		case "acknowledgedAt":
			m.AcknowledgedAt = r.int()
		default:
			r.fail()
		}
	}
}
