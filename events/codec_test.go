package events

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// fill sets every field of the struct v points to to a non-zero value, so a
// round trip proves that every field (and its tag) survives the codec.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i))
		}
	case reflect.String:
		v.SetString("s-" + v.Type().String())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(7)
	case reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(9)
	case reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		fill(s.Index(0))
		fill(s.Index(1))
		v.Set(s)
	default:
		panic("fill: unhandled kind " + v.Kind().String())
	}
}

func filled(t string) any {
	p := NewPayload(t)
	fill(reflect.ValueOf(p).Elem())
	return p
}

func TestRegistryCoversContract(t *testing.T) {
	// Every type named by the contract (SPEC §3, plus D§4.4's
	// task.budget_fair_share, D§3.6's policy.action, and foreign.imported
	// for the source events an import keeps, import.checkpoint for a follower's progress, and the job events of
	// D§9), spelled out so a missing or misspelt
	// constant fails here.
	want := strings.Fields(`run.created run.queued run.planning run.running run.blocked run.completed run.failed
		run.cancelled run.budget_warning run.budget_abort run.quota_exceeded task.budget_fair_share task.created
		task.started task.completed task.failed
		task.cancelled task.skipped task.needs_attention task.retried task.waiting task.resumed task.usage
		delegate.requested delegate.admitted delegate.rejected delegate.spawned delegate.completed
		delegate.failed delegate.timed_out delegate.cancel_requested delegate.cancelled budget.reserved
		budget.charged mailbox.appended mailbox.delivered mailbox.acknowledged steer.pushed ask.requested
		ask.answered ask.timedout credential.issued credential.revoked engine.configured store.migrated
		policy.action foreign.imported import.checkpoint
		job.created job.status_changed job.roots_reset job.rejected lease.opened lease.cleared
		proxy.requested proxy.rejected proxy.completed proxy.cancelled manifest.revalidated
		manifest.revalidation_failed`)
	require.ElementsMatch(t, want, Types())
	for _, typ := range want {
		require.True(t, IsKnown(typ), typ)
		wantVersion := uint16(1)
		if typ == TypeTaskCreated {
			wantVersion = 2 // gained kind (upcast.go)
		}
		require.Equal(t, wantVersion, SchemaVersion(typ), typ)
		p := NewPayload(typ)
		require.NotNil(t, p, typ)
		require.Equal(t, reflect.Pointer, reflect.TypeOf(p).Kind(), typ)
		got, ok := TypeOf(p)
		require.True(t, ok, typ)
		require.Equal(t, typ, got, "payload type must identify its event type")
	}
	require.False(t, IsKnown("run.terminal_preserved"))
	require.Zero(t, SchemaVersion("nope"))
	require.Nil(t, NewPayload("nope"))
}

// Every delegate.* and budget.* payload names its delegation by the parent task (taskId) and the delegation (subId),
// on the wire as in the log: the projections and the broker find a delegation by the two.
func TestDelegationPayloadsCarryTaskIDAndSubID(t *testing.T) {
	n := 0
	for _, typ := range Types() {
		if !strings.HasPrefix(typ, "delegate.") && !strings.HasPrefix(typ, "budget.") {
			continue
		}
		n++
		b, err := EncodePayload(filled(typ))
		require.NoError(t, err)
		var keys map[string]any
		require.NoError(t, msgpack.Unmarshal(b, &keys))
		require.Contains(t, keys, "taskId", typ)
		require.Contains(t, keys, "subId", typ)
	}
	require.Equal(t, 11, n, "the delegate.* and budget.* types")
}

func TestTagsAreCamelCaseAndAgree(t *testing.T) {
	for _, typ := range Types() {
		checkTags(t, typ, reflect.TypeOf(NewPayload(typ)).Elem())
	}
}

func checkTags(t *testing.T, typ string, rt reflect.Type) {
	for i := range rt.NumField() {
		f := rt.Field(i)
		js, mp := f.Tag.Get("json"), f.Tag.Get("msgpack")
		require.NotEmpty(t, js, "%s.%s has no json tag", typ, f.Name)
		require.Equal(t, js, mp, "%s.%s: json and msgpack tags differ", typ, f.Name)
		name := strings.Split(js, ",")[0]
		require.NotContains(t, name, "_", "%s.%s: keys are camelCase", typ, f.Name)
		require.Equal(t, strings.ToLower(name[:1]), name[:1], "%s.%s: keys are camelCase", typ, f.Name)
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		require.NotEqual(t, reflect.Map, ft.Kind(), "%s.%s: maps would make encoding non-deterministic", typ, f.Name)
		if ft.Kind() == reflect.Struct {
			checkTags(t, typ, ft)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, typ := range Types() {
		t.Run(typ, func(t *testing.T) {
			for _, p := range []any{NewPayload(typ), filled(typ)} {
				b, err := EncodePayload(p)
				require.NoError(t, err)
				got, err := DecodePayload(typ, SchemaVersion(typ), b)
				require.NoError(t, err)
				require.Equal(t, p, got)

				again, err := EncodePayload(got)
				require.NoError(t, err)
				require.Equal(t, b, again, "encoding must be deterministic")

				// A value encodes like the pointer to it.
				byValue, err := EncodePayload(reflect.ValueOf(p).Elem().Interface())
				require.NoError(t, err)
				require.Equal(t, b, byValue)
			}
		})
	}
}

func TestPayloadKeys(t *testing.T) {
	// The pi-crew keys of D§3.5 and the optional-field rules.
	tests := []struct {
		name string
		p    any
		want string
	}{
		{"admitted unmetered", &DelegateAdmitted{TaskID: "02_exec", SubID: "gc-1", ChildDepth: 2, Role: "explorer",
			Unmetered: true, TimeoutSec: 900, Deadline: 5, Cwd: "/w", Title: "delegate: x", Prompt: "p"},
			`{"taskId":"02_exec","subId":"gc-1","childDepth":2,"role":"explorer","unmetered":true,"timeoutSec":900,` +
				`"deadline":5,"cwd":"/w","title":"delegate: x","prompt":"p"}`},
		{"admitted metered", &DelegateAdmitted{TaskID: "02_exec", SubID: "gc-1", ChildDepth: 2, Role: "explorer",
			ReservedTokens: 20000, Model: "anthropic/m1", TimeoutSec: 900, Deadline: 5, Cwd: "/w", Title: "t",
			Prompt: "p"},
			`{"taskId":"02_exec","subId":"gc-1","childDepth":2,"role":"explorer","reservedTokens":20000,` +
				`"model":"anthropic/m1","timeoutSec":900,"deadline":5,"cwd":"/w","title":"t","prompt":"p"}`},
		{"rejected without subId", &DelegateRejected{TaskID: "02_exec", Reason: ReasonNestingDisabled},
			`{"taskId":"02_exec","reason":"nesting-disabled"}`},
		{"settled", &DelegateCompleted{TaskID: "P", SubID: "gc-1", OK: true},
			`{"taskId":"P","subId":"gc-1","ok":true}`},
		{"reserved", &BudgetReserved{TaskID: "P", SubID: "gc-1", Tokens: 20000, GrantedTokens: 100000},
			`{"taskId":"P","subId":"gc-1","tokens":20000,"grantedTokens":100000}`},
		{"no catalog", &EngineConfigured{MaxDepth: 4, MaxSlots: 2, UnmeteredDelegates: UnmeteredAllow,
			SettleGraceSec: 30},
			`{"nestingEnabled":false,"maxDepth":4,"maxSlots":2,"serializeOnPathOverlap":false,` +
				`"unmeteredDelegates":"allow","modelCatalog":null,"settleGraceSec":30}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			js, err := json.Marshal(tc.p)
			require.NoError(t, err)
			require.JSONEq(t, tc.want, string(js))

			// msgpack carries the same keys and values as the json form.
			b, err := EncodePayload(tc.p)
			require.NoError(t, err)
			var m map[string]any
			require.NoError(t, msgpack.Unmarshal(b, &m))
			var jm map[string]any
			require.NoError(t, json.Unmarshal(js, &jm))
			require.Len(t, m, len(jm))
			for k := range jm {
				require.Contains(t, m, k)
			}
		})
	}
}

func TestEmptyCatalogIsNotNoCatalog(t *testing.T) {
	for _, catalog := range [][]string{nil, {}} {
		b, err := EncodePayload(&EngineConfigured{ModelCatalog: catalog})
		require.NoError(t, err)
		got, err := DecodePayload(TypeEngineConfigured, 1, b)
		require.NoError(t, err)
		require.Equal(t, catalog == nil, got.(*EngineConfigured).ModelCatalog == nil)
	}
}

func TestDecodeErrors(t *testing.T) {
	good, err := EncodePayload(filled(TypeDelegateAdmitted))
	require.NoError(t, err)
	tests := []struct {
		name    string
		typ     string
		version uint16
		b       []byte
		want    error
	}{
		{"unknown type", "run.terminal_preserved", 1, good, ErrUnknownType},
		{"empty type", "", 1, good, ErrUnknownType},
		{"version 0", TypeDelegateAdmitted, 0, good, ErrUnsupportedVersion},
		{"newer version", TypeDelegateAdmitted, 2, good, ErrUnsupportedVersion},
		{"empty bytes", TypeDelegateAdmitted, 1, nil, ErrBadPayload},
		{"truncated", TypeDelegateAdmitted, 1, good[:len(good)/2], ErrBadPayload},
		{"trailing bytes", TypeDelegateAdmitted, 1, append(append([]byte{}, good...), 0xc0), ErrBadPayload},
		{"not a map", TypeDelegateAdmitted, 1, []byte{0xa3, 'a', 'b', 'c'}, ErrBadPayload},
		{"wrong field type", TypeDelegateAdmitted, 1, mustMarshal(t, map[string]any{"childDepth": "two"}),
			ErrBadPayload},
		{"garbage", TypeTaskCreated, 1, []byte{0xff, 0x00, 0x13, 0x37}, ErrBadPayload},
		{"huge array length", TypeTaskCreated, 1, []byte{0x81, 0xa9, 'd', 'e', 'p', 'e', 'n', 'd', 's', 'O', 'n',
			0xdd, 0xff, 0xff, 0xff, 0xff}, ErrBadPayload},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := DecodePayload(tc.typ, tc.version, tc.b)
			require.Nil(t, p)
			require.ErrorIs(t, err, tc.want)
			require.True(t, strings.HasPrefix(err.Error(), "events: "), err.Error())
		})
	}
}

func TestUnknownFieldsAreTolerated(t *testing.T) {
	// A newer writer may add keys; an older reader skips them.
	b := mustMarshal(t, map[string]any{"taskId": "P", "subId": "gc-1", "pid": 42, "future": []any{1, "x"}})
	p, err := DecodePayload(TypeDelegateSpawned, 1, b)
	require.NoError(t, err)
	require.Equal(t, &DelegateSpawned{TaskID: "P", SubID: "gc-1", PID: 42}, p)
}

func TestEncodeRejectsNonPayloads(t *testing.T) {
	for _, p := range []any{nil, 42, "x", struct{ A int }{1}, &Event{}} {
		_, err := EncodePayload(p)
		require.ErrorIs(t, err, ErrUnknownType)
	}
}

func TestUpcastSeam(t *testing.T) {
	// Simulate a future v2 of task.resumed whose v1 lacked questionId.
	const typ = TypeTaskResumed
	saved := registry[typ]
	registry[typ] = kind{version: 2, zero: saved.zero}
	upcasters[upcastKey{typ, 1}] = func(b []byte) ([]byte, error) {
		var m map[string]any
		if err := msgpack.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		m["questionId"] = "q-upcast"
		return msgpack.Marshal(m)
	}
	t.Cleanup(func() {
		registry[typ] = saved
		delete(upcasters, upcastKey{typ, 1})
	})

	old := mustMarshal(t, map[string]any{"taskId": "P"})
	p, err := DecodePayload(typ, 1, old)
	require.NoError(t, err)
	require.Equal(t, &TaskResumed{TaskID: "P", QuestionID: "q-upcast"}, p)

	delete(upcasters, upcastKey{typ, 1})
	_, err = DecodePayload(typ, 1, old)
	require.True(t, errors.Is(err, ErrUnsupportedVersion), err)
}

func TestRunStatusType(t *testing.T) {
	for _, s := range []string{"queued", "planning", "running", "blocked", "completed", "failed", "cancelled"} {
		typ, ok := RunStatusType(s)
		require.True(t, ok)
		require.True(t, IsKnown(typ))
	}
	_, ok := RunStatusType("created")
	require.False(t, ok)
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	require.NoError(t, err)
	return b
}

func FuzzDecodePayload(f *testing.F) {
	types := Types()
	for i, typ := range types {
		b, err := EncodePayload(filled(typ))
		require.NoError(f, err)
		f.Add(uint8(i), uint16(1), b)
		f.Add(uint8(i), uint16(1), b[:len(b)/2])
	}
	f.Add(uint8(0), uint16(1), []byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	ck := uint8(slices.Index(types, TypeImportCheckpoint))
	for _, c := range impossibleCheckpoints() {
		b, err := EncodePayload(&c)
		require.NoError(f, err)
		f.Add(ck, uint16(1), b)
	}
	f.Fuzz(func(t *testing.T, ti uint8, version uint16, b []byte) {
		typ := types[int(ti)%len(types)]
		p, err := DecodePayload(typ, version, b)
		if v, ok := p.(validator); ok {
			require.NoError(t, v.Validate(), "decoded a payload that refuses itself")
		}
		if err != nil {
			require.Nil(t, p)
			if !errors.Is(err, ErrBadPayload) && !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		// Whatever decodes must re-encode to a fixed point (bytes, not
		// structs, are compared so a decoded NaN still counts as equal).
		again, err := EncodePayload(p)
		require.NoError(t, err)
		p2, err := DecodePayload(typ, version, again)
		require.NoError(t, err)
		third, err := EncodePayload(p2)
		require.NoError(t, err)
		require.Equal(t, again, third)
	})
}
