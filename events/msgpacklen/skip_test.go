package msgpacklen

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

func TestFitRefusesADeclaredLengthTheBytesDoNotHold(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
		fit  bool
	}{
		{"empty", nil, false},
		{"positive fixint", []byte{0x05}, true},
		{"fixstr whole", []byte{0xa2, 'h', 'i'}, true},
		{"fixstr short", []byte{0xa3, 'h', 'i'}, false},
		{"str32 of 4 GiB in 5 bytes", []byte{0xdb, 0xff, 0xff, 0xff, 0xff}, false},
		{"bin8 short", []byte{0xc4, 0x02, 0x00}, false},
		{"array32 of 2^32-1 in 5 bytes", []byte{0xdd, 0xff, 0xff, 0xff, 0xff}, false},
		{"map16 counts keys and values", []byte{0xde, 0x00, 0x01, 0x01}, false},
		{"map16 whole", []byte{0xde, 0x00, 0x01, 0x01, 0x02}, true},
		{"nested array short inside", []byte{0x91, 0x92, 0x01}, false},
		{"uint64 short", []byte{0xcf, 0, 0, 0}, false},
		{"fixext16 short", []byte{0xd8, 0x01, 0x00}, false},
		{"ext8 whole", []byte{0xc7, 0x01, 0x05, 0xaa}, true},
		{"ext32 length short", []byte{0xc9, 0x00, 0x00}, false},
		{"never-used code fits: the decoder refuses it", []byte{0xc1}, true},
		{"only the first value counts", []byte{0x01, 0xdb, 0xff}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.fit, Fit(c.b))
		})
	}
}

func TestSkipEndsWhereEncodedValuesEnd(t *testing.T) {
	values := []any{
		map[string]any{"a": []any{1, "x", 2.5, true, nil}, "b": map[string]any{"c": []byte("zz")}},
		int64(-1 << 40), uint64(1 << 63), "a longer string than a fixstr can hold, thirty-two bytes and more",
		make([]byte, 70000), make([]any, 17),
	}
	var b []byte
	for _, v := range values {
		e, err := msgpack.Marshal(v)
		require.NoError(t, err)
		b = append(b, e...)
	}
	i, st := Skip(b, 0, len(values))
	require.Equal(t, OK, st)
	require.Equal(t, len(b), i)

	_, st = Skip(b, 0, len(values)+1)
	require.Equal(t, Short, st, "one value more than the bytes hold")
	_, st = Skip(b[:len(b)-1], 0, len(values))
	require.Equal(t, Short, st)
}

func TestSkipStopsAtTheNeverUsedCode(t *testing.T) {
	i, st := Skip([]byte{0x01, 0xc1, 0x02}, 0, 3)
	require.Equal(t, Unknown, st)
	require.Equal(t, 2, i)
}
