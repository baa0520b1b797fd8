package eventlog

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
)

func TestVerifyVisitsEveryCheckedRecordInOrder(t *testing.T) {
	l := buildSample(t)
	defer l.Close()
	var seen []Event
	_, err := l.Verify(&VerifyOptions{Visit: func(ev *Event) error {
		seen = append(seen, cloneEvent(ev))
		return nil
	}})
	require.NoError(t, err)
	require.Equal(t, readAll(t, l), seen)
}

func TestVerifyStopsAtVisitError(t *testing.T) {
	l := buildSample(t)
	defer l.Close()
	stop := errors.New("enough")
	var n int
	_, err := l.Verify(&VerifyOptions{Visit: func(ev *Event) error {
		if n++; ev.Position == 3 {
			return stop
		}
		return nil
	}})
	require.Same(t, stop, err)
	require.Equal(t, 3, n)
}

func TestVerifyVisitsNoRecordPastDamage(t *testing.T) {
	l := buildSample(t)
	defer l.Close()
	require.NoError(t, l.db.Delete(eventKey(4), pebble.Sync))
	var last uint64
	_, err := l.Verify(&VerifyOptions{Visit: func(ev *Event) error {
		last = ev.Position
		return nil
	}})
	var ce *CorruptError
	require.ErrorAs(t, err, &ce)
	require.EqualValues(t, 4, ce.Position)
	require.EqualValues(t, 3, last)
}
