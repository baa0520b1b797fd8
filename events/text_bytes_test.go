package events

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// reflectStringBytes is the reference for PayloadStringBytes: the lengths
// of every string v holds, found by reflection.
func reflectStringBytes(v reflect.Value) int64 {
	switch v.Kind() {
	case reflect.String:
		return int64(v.Len())
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return 0
		}
		return reflectStringBytes(v.Elem())
	case reflect.Slice, reflect.Array:
		var n int64
		for i := range v.Len() {
			n += reflectStringBytes(v.Index(i))
		}
		return n
	case reflect.Struct:
		var n int64
		for i := range v.NumField() {
			n += reflectStringBytes(v.Field(i))
		}
		return n
	case reflect.Map:
		var n int64
		for it := v.MapRange(); it.Next(); {
			n += reflectStringBytes(it.Key()) + reflectStringBytes(it.Value())
		}
		return n
	}
	return 0
}

// Every string of every payload counts, those of the structs it points to
// included: a field added later is counted without anyone listing it.
func TestPayloadStringBytesCountsEveryString(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, typ := range Types() {
		t.Run(typ, func(t *testing.T) {
			check := func(p any) {
				n, ok := PayloadStringBytes(p)
				require.True(t, ok)
				require.Equal(t, reflectStringBytes(reflect.ValueOf(p)), n, "%#v", p)
				byValue, ok := PayloadStringBytes(reflect.ValueOf(p).Elem().Interface())
				require.True(t, ok)
				require.Equal(t, n, byValue)
			}
			check(NewPayload(typ))
			f := filled(typ)
			check(f)
			n, _ := PayloadStringBytes(f)
			require.Equal(t, reflectStringBytes(reflect.ValueOf(f)) > 0, n > 0)
			for range 50 {
				p := NewPayload(typ)
				randomFill(rng, reflect.ValueOf(p).Elem())
				check(p)
			}
		})
	}
	n, ok := PayloadStringBytes((*TaskStarted)(nil))
	require.True(t, ok)
	require.Zero(t, n)
	_, ok = PayloadStringBytes("not a payload")
	require.False(t, ok)
}

func TestTextBytes(t *testing.T) {
	status := Event{Type: TypeTaskFailed, Payload: &TaskFailed{TaskID: "t1", Error: "boom"}}
	require.Equal(t, int64(len("t1")+len("boom")), TextBytes(status))
	// The envelope's strings count: a client chose the command id and its
	// task, and every event of a decision repeats them.
	status.CommandID, status.CausationID, status.CorrelationID, status.Actor = "cmd", "cause", "corr",
		Actor{Role: RoleWorker, TaskID: "w1"}
	require.Equal(t, int64(len("t1"+"boom"+"cmd"+"cause"+"corr"+"w1")), TextBytes(status))
	// A message's body and subject are the run's message bytes; its other
	// strings (ids, replyTo, questionId, copied to every recipient) are text.
	msg := Event{Type: TypeMailboxAppended, Payload: &MailboxAppended{ID: "m1", To: "t1", Body: "hello", Subject: "s",
		ReplyTo: "q"}}
	require.Equal(t, int64(len("m1"+"t1"+"q")), TextBytes(msg))
	require.Equal(t, int64(len("m1"+"t1"+"q")), TextBytes(Event{Type: TypeMailboxAppended,
		Payload: *msg.Payload.(*MailboxAppended)}))
	require.Zero(t, TextBytes(Event{Type: "unknown.type", Payload: "?"}))
}
