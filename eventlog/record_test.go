package eventlog

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

func TestRecordRoundTrip(t *testing.T) {
	long := string(make([]byte, 70000))
	cases := map[string]Event{
		"small":                 ev("run-1", "run.created"),
		"empty payload and ids": {Position: 1, Stream: "r", StreamVersion: 1, Type: "t"},
		"wide integers": {Position: 1 << 40, Stream: "r", StreamVersion: 1 << 33, Type: "t",
			SchemaVersion: 65535, Time: -5, Payload: make([]byte, 300)},
		"long strings": {Position: 7, Stream: "r", StreamVersion: 2, Type: "t", CommandID: long[:300],
			CorrelationID: long[:40], Payload: []byte(long)},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			in := in
			if in.Position == 0 {
				in.Position, in.StreamVersion = 3, 1
			}
			var prev [32]byte
			prev[0] = 9
			v := appendRecord(nil, &prev, &in)
			var out Event
			require.NoError(t, DecodeRecord(v, &out))
			if in.Payload == nil {
				in.Payload = []byte{}
			}
			require.Equal(t, in, out)
			require.Equal(t, chainHash(&prev, recordBody(v)), out.Hash)
		})
	}
}

// The body is standard msgpack: any msgpack reader decodes it.
func TestRecordBodyIsMsgpack(t *testing.T) {
	in := ev("run-1", "delegate.admitted")
	in.Position, in.StreamVersion = 42, 7
	v := appendRecord(nil, &[32]byte{}, &in)
	var fields []any
	require.NoError(t, msgpack.Unmarshal(recordBody(v), &fields))
	require.Len(t, fields, recordFields)
	require.EqualValues(t, 42, fields[0])
	require.Equal(t, "run-1", fields[1])
	require.Equal(t, "delegate.admitted", fields[3])
	require.Equal(t, in.Payload, fields[11])
}

func TestDecodeRecordRejectsDamage(t *testing.T) {
	in := ev("run-1", "run.created")
	in.Position, in.StreamVersion = 1, 1
	good := appendRecord(nil, &[32]byte{}, &in)
	for i := range good {
		bad := append([]byte(nil), good...)
		bad[i] ^= 0x20
		var out Event
		err := DecodeRecord(bad, &out)
		require.ErrorIs(t, err, ErrCorrupt, "flip at byte %d", i)
	}
	for n := 0; n < len(good); n++ {
		var out Event
		require.ErrorIs(t, DecodeRecord(good[:n], &out), ErrCorrupt, "truncated to %d", n)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	in := ev("run-1", "run.created")
	in.Position, in.StreamVersion = 1, 1
	good := appendRecord(nil, &[32]byte{}, &in)
	f.Add(good)
	f.Add(good[:40])
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var out Event
		if err := DecodeRecord(b, &out); err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		requireRoundTrip(t, &out, recordBody(b))
	})
}

// requireRoundTrip checks that a decoded event re-encodes to a record that
// decodes to the same event, whose body is a fixed point of decode and
// encode, and that a canonical body (what appendBody writes) re-encodes to
// itself byte for byte.
func requireRoundTrip(t *testing.T, out *Event, body []byte) {
	t.Helper()
	again := appendBody(nil, out)
	v := make([]byte, recordHeaderLen, recordHeaderLen+len(again))
	v[0] = recordVersion
	copy(v[5:], out.Hash[:])
	v = append(v, again...)
	binary.BigEndian.PutUint32(v[1:5], crcOf(v[5:]))
	var back Event
	require.NoError(t, DecodeRecord(v, &back), "a re-encoded record decodes")
	require.Equal(t, *out, back, "decode(encode(e)) = e")
	require.Equal(t, again, appendBody(nil, &back), "the re-encoded body is a fixed point")
	if isCanonical(body) {
		require.Equal(t, body, again, "a canonical body re-encodes to itself")
	}
}

// isCanonical reports whether body is what appendBody writes for the event
// it decodes to: the shortest encoding of every field.
func isCanonical(body []byte) bool {
	var e Event
	return DecodeRecord(sealedBody(body), &e) == nil && bytes.Equal(appendBody(nil, &e), body)
}

// sealedBody is a record of body under a valid checksum (and a zero hash): what reaches the body parser, which the
// checksum otherwise shields, whatever bytes body holds.
func sealedBody(body []byte) []byte {
	v := make([]byte, recordHeaderLen, recordHeaderLen+len(body))
	v[0] = recordVersion
	v = append(v, body...)
	binary.BigEndian.PutUint32(v[1:5], crcOf(v[5:]))
	return v
}

// The fuzzer must also reach the body parser, which the checksum normally
// shields: re-seal arbitrary bodies with a valid checksum.
func FuzzDecodeRecordBody(f *testing.F) {
	in := ev("run-1", "run.created")
	in.Position, in.StreamVersion = 1, 1
	f.Add(recordBody(appendRecord(nil, &[32]byte{}, &in)))
	f.Add([]byte{0x9c})
	f.Add([]byte{0xdc, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, body []byte) {
		var out Event
		if err := DecodeRecord(sealedBody(body), &out); err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		requireRoundTrip(t, &out, body)
	})
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// The stored bytes are doc.go's, computed here from the layout alone and not by the code that writes them: stores
// written by one build are read and verified by every later one, so a change of the checksum, its byte order or what
// it covers, of the hash, its order or the genesis position 1 chains to, or of the head's layout is a change of
// format that no round trip through the same code shows.
func TestStoredRecordsAndHeadFollowTheDocumentedLayout(t *testing.T) {
	l, _ := openMem(t)
	defer l.Close()
	_, err := l.Append(Write{Events: evs("a", 3)})
	require.NoError(t, err)

	castagnoliTable := crc32.MakeTable(crc32.Castagnoli)
	var prev [32]byte // position 1 chains to 32 zero bytes
	for pos := uint64(1); pos <= 3; pos++ {
		key := binary.BigEndian.AppendUint64([]byte{'e'}, pos)
		v, closer, err := l.db.Get(key)
		require.NoError(t, err, "the record of position %d is under 'e' | pos:8 BE", pos)
		v = bytes.Clone(v)
		require.NoError(t, closer.Close())

		require.Greater(t, len(v), 1+4+32)
		require.Equal(t, byte(1), v[0], "version byte")
		require.Equal(t, crc32.Checksum(v[5:], castagnoliTable), binary.BigEndian.Uint32(v[1:5]),
			"crc32c (Castagnoli), big-endian, over hash ‖ body")
		body := v[37:]
		want := sha256.Sum256(append(prev[:], body...))
		require.Equal(t, want[:], v[5:37], "hash = SHA-256(hash of position-1 ‖ body) at %d", pos)
		var fields []any
		require.NoError(t, msgpack.Unmarshal(body, &fields))
		require.Len(t, fields, 12)
		require.EqualValues(t, pos, fields[0])
		prev = want
	}

	v, closer, err := l.db.Get([]byte("mhead"))
	require.NoError(t, err)
	v = bytes.Clone(v)
	require.NoError(t, closer.Close())
	require.Len(t, v, 1+4+8+32)
	require.Equal(t, byte(1), v[0], "seal version byte")
	require.Equal(t, crc32.Checksum(v[5:], castagnoliTable), binary.BigEndian.Uint32(v[1:5]), "seal crc32c")
	require.Equal(t, uint64(3), binary.BigEndian.Uint64(v[5:13]), "the head's position")
	require.Equal(t, prev[:], v[13:], "the head's hash is the last record's")
}

// An event DecodeRecord returns (Read decodes with it) owns its memory: the value it was decoded from may be reused at
// once, as Pebble reuses an iterator's buffers when it moves, and the event keeps what it read.
func TestDecodedRecordOwnsItsMemory(t *testing.T) {
	in := ev("run-1", "run.created")
	in.Position, in.StreamVersion, in.CommandID, in.CausationID = 1, 1, "cmd", "cause"
	v := appendRecord(nil, &[32]byte{}, &in)
	var out Event
	require.NoError(t, DecodeRecord(v, &out))
	clear(v)
	require.Equal(t, in, out)
}

// TestDecodeRecordRefusesAWellSealedBodyOfAnotherShape: the checksum covers whatever bytes a writer sealed, so a body
// sealed by a faulty writer (or by hand) reaches the body's own checks: its array header must name exactly the
// twelve fields it holds, no byte may follow them, and the schema version must fit its 16 bits (65535 does, 65536
// does not: it would be read back as 0).
func TestDecodeRecordRefusesAWellSealedBodyOfAnotherShape(t *testing.T) {
	// bodyOf is a canonical body of header fields, holding schema as the schema version.
	bodyOf := func(header int, schema uint64) []byte {
		b := appendArrayHeader(nil, header)
		b = appendUint(b, 1)
		b = appendStr(b, "run-1")
		b = appendUint(b, 1)
		b = appendStr(b, "run.created")
		b = appendUint(b, schema)
		b = appendInt(b, 1_700_000_000_000_000_000)
		for range 5 { // command, causation and correlation ids, actor role and task
			b = appendStr(b, "")
		}
		return appendBin(b, []byte{0xc0})
	}
	cases := map[string]struct {
		body   []byte
		reason string // "" when the record decodes
	}{
		"twelve fields":                     {bodyOf(recordFields, 1), ""},
		"the largest schema version":        {bodyOf(recordFields, math.MaxUint16), ""},
		"a schema version past 16 bits":     {bodyOf(recordFields, 0x10000), "schema version 65536 out of range"},
		"a header of 13 over twelve fields": {bodyOf(recordFields+1, 1), "record body has 13 fields, want 12"},
		"a header of 11 over twelve fields": {bodyOf(recordFields-1, 1), "record body has 11 fields, want 12"},
		"a byte after the twelve fields":    {append(bodyOf(recordFields, 1), 0xc0), "1 trailing bytes after record body"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var out Event
			err := DecodeRecord(sealedBody(c.body), &out)
			if c.reason == "" {
				require.NoError(t, err)
				require.Equal(t, c.body, appendBody(nil, &out), "the event read back encodes to the same body")
				return
			}
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorContains(t, err, c.reason)
		})
	}
}
