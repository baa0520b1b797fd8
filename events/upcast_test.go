package events

import (
	"bytes"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readFixture returns the payload bytes of a committed version-1 event,
// written by the code of that version (hex, one line).
func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	h, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	b, err := hex.DecodeString(strings.TrimSpace(string(h)))
	require.NoError(t, err)
	return b
}

func TestTaskCreatedV1FixturesDecodeToV2(t *testing.T) {
	tests := []struct {
		fixture string
		want    TaskCreated
	}{
		{"task.created.v1.workflow.hex", TaskCreated{TaskID: "01_build", Role: "executor", Agent: "executor",
			Title: "build the parser", Cwd: "/srv/app", DependsOn: []string{}, StepID: "build", Model: "anthropic/m1",
			Kind: TaskKindWorkflow}},
		{"task.created.v1.shadow.hex", TaskCreated{TaskID: "gc-5f0c2a9e", Role: "explorer", Agent: "delegate",
			Title: "delegate: read the docs", Cwd: "/srv/app", DependsOn: []string{}, Depth: 2,
			Kind: TaskKindShadow}},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			b := readFixture(t, tc.fixture)
			orig := bytes.Clone(b)
			got, err := DecodePayload(TypeTaskCreated, 1, b)
			require.NoError(t, err)
			require.Equal(t, &tc.want, got)
			require.Equal(t, orig, b, "the stored bytes are never modified")
			require.Equal(t, tc.want.Kind == TaskKindShadow, got.(*TaskCreated).Shadow())

			// The current version is written with kind, and reads back as is.
			v2, err := EncodePayload(got)
			require.NoError(t, err)
			again, err := DecodePayload(TypeTaskCreated, SchemaVersion(TypeTaskCreated), v2)
			require.NoError(t, err)
			require.Equal(t, got, again)
		})
	}
	require.Equal(t, uint16(2), SchemaVersion(TypeTaskCreated), "new task.created events are written at v2")
}

func TestUpcastErrors(t *testing.T) {
	_, err := DecodePayload(TypeTaskCreated, 1, []byte{0x93, 1, 2, 3})
	require.ErrorIs(t, err, ErrBadPayload, "an array is not a v1 payload")
	_, err = DecodePayload(TypeTaskCreated, 1, nil)
	require.ErrorIs(t, err, ErrBadPayload)
	_, err = DecodePayload(TypeTaskCreated, 3, readFixture(t, "task.created.v1.workflow.hex"))
	require.ErrorIs(t, err, ErrUnsupportedVersion)
}

// appendMapEntry must grow every map header form, including the fixmap of
// 15 that has to become a map16.
func TestAppendMapEntry(t *testing.T) {
	for _, n := range []int{0, 1, 14, 15, 16, 70000} {
		m := map[string]string{}
		var buf bytes.Buffer
		switch {
		case n < 16:
			buf.WriteByte(0x80 | byte(n))
		case n < 1<<16:
			buf.Write([]byte{0xde, byte(n >> 8), byte(n)})
		default:
			buf.Write([]byte{0xdf, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
		}
		for i := range n {
			k := "k" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) +
				hex.EncodeToString([]byte{byte(i >> 16), byte(i >> 8), byte(i)})
			buf.Write(appendMsgpackStr(nil, k))
			buf.Write(appendMsgpackStr(nil, "v"))
			m[k] = "v"
		}
		out, err := appendMapEntry(buf.Bytes(), "kind", "shadow")
		require.NoError(t, err, "n=%d", n)
		var got map[string]string
		require.NoError(t, decodeInto(&got, out), "n=%d", n)
		m["kind"] = "shadow"
		require.Equal(t, m, got, "n=%d", n)
	}
}
