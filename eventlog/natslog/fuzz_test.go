package natslog

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// fuzzLimits are a batch's limits in the fuzz tests: small enough that a
// re-encoded group takes several chunks.
var fuzzLimits = batchLimits{messages: 100, bytes: 1 << 10}

// copyAll feeds msgs to a new copy in order, the first on the groups
// subject and the others on their subjects, and returns the groups they
// make.
func copyAll(t *testing.T, subjects []string, msgs [][]byte) ([]*copied, error) {
	l := &Log{cfg: testConfig}
	var out []*copied
	for i, data := range msgs {
		g, err := l.copyMessage(uint64(i+1), subjects[i], "", data)
		if err != nil {
			require.True(t, errorsIsAny(err, eventlog.ErrCorrupt, ErrDiverged), "unexpected error %v", err)
			return out, err
		}
		if g != nil {
			out = append(out, g)
		}
	}
	return out, nil
}

func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// FuzzCopyMessage reads a manifest and a chunk as a copy reads the stream:
// any bytes give a group or ErrCorrupt or ErrDiverged, never a panic nor an
// allocation sized by a length the bytes do not hold; a group read whole is
// one the writer encodes again to messages that copy to the same group.
func FuzzCopyMessage(f *testing.F) {
	ws := []eventlog.Write{
		{Principal: "admin", CommandID: "c1", Result: []byte("{}"), Fingerprint: []byte{1, 2},
			Expected: []eventlog.Expectation{{Stream: "r1", Version: -1}},
			Events: []eventlog.Event{{Stream: "r1", Type: "RunCreated", SchemaVersion: 1, Time: 7, Payload: []byte{0x80}},
				{Stream: "r1", Type: "TaskCreated", SchemaVersion: 1, Time: 8, ActorRole: "orchestrator", Payload: []byte{0x80}}}},
		{Principal: "task:r1/t", CommandID: "c2", Code: "conflict", Reason: "no"},
	}
	msgs, err := encodeBatch(testConfig, fuzzLimits, "b1", "", 3, 0, ws)
	require.NoError(f, err)
	require.Len(f, msgs, 2)
	f.Add(msgs[0].Data, msgs[1].Data)
	one, err := encodeBatch(testConfig, fuzzLimits, "b2", "", 0, 0, ws[1:])
	require.NoError(f, err)
	f.Add(one[0].Data, []byte(nil))
	f.Add([]byte{groupVersion, 0x92, 0x01, 0x90}, []byte(nil))
	// An array of 2^32-1 writes, then of as many events, in a few bytes.
	f.Add([]byte{batchVersion, 0x94, 0xa1, 'b', 0x00, 0x02, 0xdd, 0xff, 0xff, 0xff, 0xff}, []byte(nil))
	f.Add(msgs[0].Data, []byte{batchVersion, 0x94, 0xa2, 'b', '1', 0x02, 0xa2, 'r', '1', 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{groupVersion, 0x92, 0x01, 0xdd, 0xff, 0xff, 0xff, 0xff}, []byte(nil))

	events := testConfig.EventSubject("r1")
	f.Fuzz(func(t *testing.T, manifest, chunk []byte) {
		got, err := copyAll(t, []string{testConfig.Subject(), events}, [][]byte{manifest, chunk})
		if err != nil || len(got) == 0 {
			return
		}
		g := got[0]
		if manifest[0] == groupVersion {
			return // the first layout: nothing writes it any more
		}
		n := 0
		for _, w := range g.ws {
			n += len(w.Events)
			for _, e := range w.Events {
				require.Equal(t, "r1", e.Stream)
				require.Equal(t, w.CommandID, e.CommandID)
			}
		}
		again, err := encodeBatch(testConfig, fuzzLimits, g.batch, "", g.after, 0, g.ws)
		if err != nil {
			require.ErrorIs(t, err, ErrGroupTooLarge)
			return
		}
		subjects := []string{testConfig.Subject()}
		var datas [][]byte
		for i, m := range again {
			if i > 0 {
				subjects = append(subjects, m.Subject)
			}
			datas = append(datas, m.Data)
		}
		back, err := copyAll(t, subjects, datas)
		require.NoError(t, err)
		require.Len(t, back, 1)
		require.Equal(t, g, back[0])
	})
}
