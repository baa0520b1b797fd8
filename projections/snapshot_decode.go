package projections

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

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

// reflectionDecodes counts the views and snapshots decoded by reflection,
// the fast path having fallen back: none, for what crewlog writes (tests
// check it).
var reflectionDecodes atomic.Int64

// viewReader reads msgpack that checkMsgpack has checked. On the first
// problem it sets bad and every later read returns a zero value, so the
// decoders check once, at the end (loops check ok to stop early).
type viewReader struct {
	b   []byte
	i   int
	bad bool
	// depth is how many containers enclose the values being read, so that
	// a value handed to reflection is held to what is left of
	// maxSnapshotDepth, as checkMsgpack holds the whole. An entry point
	// sets it for its map's values; an array of records (readRecords,
	// readValues) adds its own and its records' maps.
	depth int
}

func (r *viewReader) ok() bool { return !r.bad }

func (r *viewReader) fail() { r.bad = true }

// once marks field bit of a map as read, failing on a key met twice:
// reflection would merge the second value into the first, or reset it.
func (r *viewReader) once(seen *uint64, bit int) {
	if *seen&(1<<bit) != 0 {
		r.bad = true
	}
	*seen |= 1 << bit
}

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
	end, err := msgpackEnd(r.b, r.i, 1, r.depth)
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
	var seen uint64
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "subId":
			r.once(&seen, 0)
			d.SubID = r.str()
		case "ok":
			r.once(&seen, 1)
			d.OK = r.bool()
		case "timedOut":
			r.once(&seen, 2)
			d.TimedOut = r.bool()
		case "cancelled":
			r.once(&seen, 3)
			d.Cancelled = r.bool()
		default:
			r.fail()
		}
	}
	return d
}

// decodeVersioned decodes b, a format (a msgpack uint16) then one value of
// T: with fast, given the bytes after the format, when the format is the
// uint16 crewlog writes and one this build reads, and with msgpack's
// reflection (decodeByReflection) when fast falls back. Its errors name no
// context: the caller says what it decoded.
func decodeVersioned[T any](b []byte, fast func([]byte) (*T, error)) (*T, error) {
	if len(b) >= 3 && b[0] == 0xcd {
		// NB: a format this build does not read (a view an older build wrote) is refused before reflection walks
		// its whole record only to refuse it.
		f := binary.BigEndian.Uint16(b[1:])
		if !readableFormat(f) {
			return nil, fmt.Errorf("format %d, want %d", f, SnapshotFormat)
		}
		if v, err := fast(b[3:]); err == nil {
			return v, nil
		}
	}
	reflectionDecodes.Add(1)
	v, _, err := decodeByReflection[T](b)
	return v, err
}

// decodeByReflection decodes a format and one value of T with msgpack's
// reflection, after checkMsgpack has bounded every length in b.
func decodeByReflection[T any](b []byte) (*T, uint16, error) {
	if err := checkMsgpack(b, 2); err != nil {
		return nil, 0, err
	}
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	format, err := dec.DecodeUint16()
	if err != nil {
		return nil, 0, fmt.Errorf("format version: %v", err)
	}
	if !readableFormat(format) {
		return nil, 0, fmt.Errorf("format %d, want %d", format, SnapshotFormat)
	}
	v := new(T)
	if err := dec.Decode(v); err != nil {
		return nil, 0, err
	}
	return v, format, nil
}

// decodeSnapshotFields decodes a whole snapshot (appendSnapshot's bytes,
// after the format) from b, or returns errFastFallback: its head (the
// config and the ordinals by reflection), then every run as
// decodeSnapshotRun reads one. A start-up decodes the snapshot, and a long
// busy run in it holds tens of thousands of records.
func decodeSnapshotFields(b []byte) (*snapshot, error) {
	r := &viewReader{b: b, depth: 1} // the values of the snapshot's map
	var snap snapshot
	var seen uint64
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "position":
			r.once(&seen, 0)
			snap.Position = r.uint64()
		case "config":
			r.once(&seen, 1)
			r.reflected(&snap.Config)
		case "runCount":
			r.once(&seen, 2)
			snap.RunCount = int(r.int())
		case "ords":
			r.once(&seen, 3)
			r.reflected(&snap.Ords)
		case "missingViews":
			r.once(&seen, 4)
			snap.MissingViews = r.strs()
		case "runs":
			r.once(&seen, 5)
			snap.Runs = readValues(r, readSnapshotRun)
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
	r := &viewReader{b: b, depth: 1} // the values of the run's map
	var sr snapshotRun
	readSnapshotRun(r, &sr)
	if r.bad || r.i != len(b) {
		return nil, errFastFallback
	}
	return &sr, nil
}

// readSnapshotRun reads one run's map into sr.
func readSnapshotRun(r *viewReader, sr *snapshotRun) {
	var seen uint64
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "run":
			r.once(&seen, 0)
			r.reflected(&sr.Run)
		case "last":
			r.once(&seen, 1)
			sr.Last = r.uint64()
		case "cold":
			r.once(&seen, 2)
			sr.Cold = r.bool()
		case "tasks":
			r.once(&seen, 3)
			sr.Tasks = readRecords(r, readTask)
		case "delegations":
			r.once(&seen, 4)
			sr.Delegations = readRecords(r, readDelegation)
		case "accounts":
			r.once(&seen, 5)
			sr.Accounts = readRecords(r, readAccount)
		case "messages":
			r.once(&seen, 6)
			sr.Messages = readValues(r, readMessage)
		case "asks":
			r.once(&seen, 7)
			r.reflected(&sr.Asks)
		case "credentials":
			r.once(&seen, 8)
			r.reflected(&sr.Credentials)
		case "rootSpent":
			r.once(&seen, 9)
			sr.RootSpent = r.int()
		case "jobs":
			r.once(&seen, 10)
			r.reflected(&sr.Jobs)
		case "revokedRoots":
			r.once(&seen, 11)
			r.reflected(&sr.RevokedRoots)
		case "noView":
			r.once(&seen, 12)
			sr.NoView = r.bool()
		default:
			r.fail()
		}
	}
}

// minRecordBytes is less than any record's encoding takes (its map header
// and a key or two): it bounds what readRecords and readValues allocate up
// front.
const minRecordBytes = 16

// readValues reads an array of records held by value (nil for a nil
// array). A length more than the bytes left could hold fails before
// anything is allocated: the records are allocated up front.
func readValues[T any](r *viewReader, read func(*viewReader, *T)) []T {
	n := r.arrayLen()
	if n > (len(r.b)-r.i)/minRecordBytes+1 {
		r.fail()
	}
	if n < 0 || r.bad {
		return nil
	}
	out := make([]T, n)
	r.depth += 2 // the array, a record's map
	for i := 0; i < n && r.ok(); i++ {
		read(r, &out[i])
	}
	r.depth -= 2
	return out
}

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
	r.depth += 2 // the array, a record's map
	defer func() { r.depth -= 2 }()
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
	var seen uint64
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "runId":
			r.once(&seen, 0)
			t.RunID = r.str()
		case "id":
			r.once(&seen, 1)
			t.TaskID = r.str()
		case "kind":
			r.once(&seen, 2)
			t.Kind = r.str()
		case "stepId":
			r.once(&seen, 3)
			t.StepID = r.str()
		case "role":
			r.once(&seen, 4)
			t.Role = r.str()
		case "agent":
			r.once(&seen, 5)
			t.Agent = r.str()
		case "title":
			r.once(&seen, 6)
			t.Title = r.str()
		case "status":
			r.once(&seen, 7)
			t.Status = TaskStatus(r.str())
		case "cwd":
			r.once(&seen, 8)
			t.Cwd = r.str()
		case "dependsOn":
			r.once(&seen, 9)
			t.DependsOn = r.strs()
		case "depth":
			r.once(&seen, 10)
			t.Depth = int(r.int())
		case "model":
			r.once(&seen, 11)
			t.Model = r.str()
		case "allocation":
			r.once(&seen, 12)
			r.reflected(&t.Allocation)
		case "waiting":
			r.once(&seen, 13)
			r.reflected(&t.Waiting)
		case "usage":
			r.once(&seen, 14)
			readUsage(r, &t.Usage)
		case "error":
			r.once(&seen, 15)
			t.Error = r.str()
		case "failureCause":
			r.once(&seen, 16)
			t.FailureCause = r.str()
		case "statusReason":
			r.once(&seen, 17)
			t.StatusReason = r.str()
		case "retries":
			r.once(&seen, 18)
			t.Retries = int(r.int())
		case "createdAt":
			r.once(&seen, 19)
			t.CreatedAt = r.int()
		case "startedAt":
			r.once(&seen, 20)
			t.StartedAt = r.int()
		case "finishedAt":
			r.once(&seen, 21)
			t.FinishedAt = r.int()
		case "actorEvents":
			r.once(&seen, 22)
			t.ActorEvents = r.int()
		case "actorBytes":
			r.once(&seen, 23)
			t.ActorBytes = r.int()
		case "slotWaitAt":
			r.once(&seen, 24)
			t.SlotWaitAt = r.int()
		default:
			r.fail()
		}
	}
}

func readUsage(r *viewReader, u *Usage) {
	var seen uint64
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "input":
			r.once(&seen, 0)
			u.Input = r.int()
		case "output":
			r.once(&seen, 1)
			u.Output = r.int()
		case "cacheRead":
			r.once(&seen, 2)
			u.CacheRead = r.int()
		case "cacheWrite":
			r.once(&seen, 3)
			u.CacheWrite = r.int()
		case "cost":
			r.once(&seen, 4)
			u.Cost = r.float()
		case "turns":
			r.once(&seen, 5)
			u.Turns = r.int()
		default:
			r.fail()
		}
	}
}

func readDelegation(r *viewReader, d *Delegation) {
	var seen uint64
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "runId":
			r.once(&seen, 0)
			d.RunID = r.str()
		case "subId":
			r.once(&seen, 1)
			d.SubID = r.str()
		case "parentTaskId":
			r.once(&seen, 2)
			d.ParentTaskID = r.str()
		case "role":
			r.once(&seen, 3)
			d.Role = r.str()
		case "depth":
			r.once(&seen, 4)
			d.Depth = int(r.int())
		case "model":
			r.once(&seen, 5)
			d.Model = r.str()
		case "timeoutSec":
			r.once(&seen, 6)
			d.TimeoutSec = r.float()
		case "deadline":
			r.once(&seen, 7)
			d.Deadline = r.int()
		case "cwd":
			r.once(&seen, 8)
			d.Cwd = r.str()
		case "title":
			r.once(&seen, 9)
			d.Title = r.str()
		case "metered":
			r.once(&seen, 10)
			d.Metered = r.bool()
		case "reservedTokens":
			r.once(&seen, 11)
			d.Reserved = r.int()
		case "status":
			r.once(&seen, 12)
			d.Status = DelegationStatus(r.str())
		case "cancelRequested":
			r.once(&seen, 13)
			d.CancelRequested = r.bool()
		case "pid":
			r.once(&seen, 14)
			d.PID = int(r.int())
		case "admittedAt":
			r.once(&seen, 15)
			d.AdmittedAt = r.int()
		case "settledAt":
			r.once(&seen, 16)
			d.SettledAt = r.int()
		case "admittedPosition":
			r.once(&seen, 17)
			d.AdmittedPosition = r.uint64()
		case "ok":
			r.once(&seen, 18)
			d.OK = r.bool()
		case "usageTokens":
			r.once(&seen, 19)
			d.UsageTokens = r.int()
		case "expired":
			r.once(&seen, 20)
			d.Expired = r.bool()
		case "messageId":
			r.once(&seen, 21)
			d.MessageID = r.str()
		case "parentAttempt":
			r.once(&seen, 22)
			d.ParentAttempt = int(r.int())
		case "shareHolder":
			r.once(&seen, 23)
			d.ShareHolder = r.str()
		default:
			r.fail()
		}
	}
}

func readAccount(r *viewReader, a *Account) {
	var seen uint64
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "runId":
			r.once(&seen, 0)
			a.RunID = r.str()
		case "taskId":
			r.once(&seen, 1)
			a.TaskID = r.str()
		case "tokensGranted":
			r.once(&seen, 2)
			a.TokensGranted = r.int()
		case "tokensSpent":
			r.once(&seen, 3)
			a.TokensSpent = r.int()
		case "reserved":
			r.once(&seen, 4)
			a.Reserved = r.int()
		case "charged":
			r.once(&seen, 5)
			a.Charged = r.int()
		case "reservations":
			r.once(&seen, 6)
			a.Reservations = readValues(r, readReservation)
		case "charges":
			r.once(&seen, 7)
			a.Charges = readValues(r, readCharge)
		default:
			r.fail()
		}
	}
}

func readReservation(r *viewReader, v *Reservation) {
	var seen uint64
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "subId":
			r.once(&seen, 0)
			v.SubID = r.str()
		case "tokens":
			r.once(&seen, 1)
			v.Tokens = r.int()
		case "at":
			r.once(&seen, 2)
			v.At = r.int()
		default:
			r.fail()
		}
	}
}

func readCharge(r *viewReader, c *Charge) {
	var seen uint64
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "subId":
			r.once(&seen, 0)
			c.SubID = r.str()
		case "tokens":
			r.once(&seen, 1)
			c.Tokens = r.int()
		case "usageTokens":
			r.once(&seen, 2)
			c.UsageTokens = r.int()
		case "reservedTokens":
			r.once(&seen, 3)
			c.ReservedTokens = r.int()
		case "at":
			r.once(&seen, 4)
			c.At = r.int()
		default:
			r.fail()
		}
	}
}

func readMessage(r *viewReader, m *Message) {
	var seen uint64
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		switch string(r.key()) {
		case "runId":
			r.once(&seen, 0)
			m.RunID = r.str()
		case "id":
			r.once(&seen, 1)
			m.ID = r.str()
		case "to":
			r.once(&seen, 2)
			m.To = r.str()
		case "from":
			r.once(&seen, 3)
			m.From = r.str()
		case "kind":
			r.once(&seen, 4)
			m.Kind = r.str()
		case "priority":
			r.once(&seen, 5)
			m.Priority = r.str()
		case "deliveryMode":
			r.once(&seen, 6)
			m.DeliveryMode = r.str()
		case "body":
			r.once(&seen, 7)
			m.Body = r.str()
		case "subject":
			r.once(&seen, 8)
			m.Subject = r.str()
		case "questionId":
			r.once(&seen, 9)
			m.QuestionID = r.str()
		case "replyTo":
			r.once(&seen, 10)
			m.ReplyTo = r.str()
		case "rerouted":
			r.once(&seen, 11)
			m.Rerouted = r.bool()
		case "data":
			r.once(&seen, 12)
			m.Data = readMessageData(r)
		case "status":
			r.once(&seen, 13)
			m.Status = MessageStatus(r.str())
		case "createdAt":
			r.once(&seen, 14)
			m.CreatedAt = r.int()
		case "deliveredAt":
			r.once(&seen, 15)
			m.DeliveredAt = r.int()
		case "acknowledgedAt":
			r.once(&seen, 16)
			m.AcknowledgedAt = r.int()
		default:
			r.fail()
		}
	}
}
