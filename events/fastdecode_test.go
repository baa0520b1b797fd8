package events

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// The generated decoders must produce exactly what reflection produces,
// for every encoding reflection accepts. These tests decode the same bytes
// both ways: canonical payloads from EncodePayload, and the same values
// re-encoded the way another msgpack writer might (keys in any order,
// unknown keys, nil for zero values, any integer and string width).

// reflectDecode is the reference: DecodePayload's reflection path.
func reflectDecode(t string, b []byte) (any, error) {
	p := NewPayload(t)
	return p, decodeInto(p, b)
}

func fastTypes(t *testing.T) []string {
	var out, uncovered []string
	for _, typ := range Types() {
		if f, ok := payloadDecoders[typ]; ok && f.version == SchemaVersion(typ) {
			out = append(out, typ)
		} else {
			uncovered = append(uncovered, typ)
		}
	}
	if len(uncovered) > 0 {
		t.Logf("decoded by reflection only: %s", strings.Join(uncovered, " "))
	}
	require.NotEmpty(t, out)
	return out
}

func TestFastDecodersKnowEveryField(t *testing.T) {
	for _, typ := range fastTypes(t) {
		t.Run(typ, func(t *testing.T) {
			want := filled(typ)
			b, err := EncodePayload(want)
			require.NoError(t, err)
			got, st := decodeFast(typ, SchemaVersion(typ), b, nil)
			require.Equal(t, fastOK, st)
			require.Equal(t, want, got, "a field the fast decoder does not read")
		})
	}
}

func TestFastDecodeMatchesReflection(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rounds := 300
	if testing.Short() {
		rounds = 30
	}
	dec := NewDecoder() // one for every round and type, as a replay uses it
	for _, typ := range fastTypes(t) {
		t.Run(typ, func(t *testing.T) {
			for i := 0; i < rounds; i++ {
				p := NewPayload(typ)
				randomFill(rng, reflect.ValueOf(p).Elem())
				canonical, err := EncodePayload(p)
				require.NoError(t, err)
				variant := (&variantWriter{rng: rng}).payload(reflect.ValueOf(p).Elem())
				for _, b := range [][]byte{canonical, variant} {
					want, err := reflectDecode(typ, b)
					require.NoError(t, err, "%x", b)
					got, st := decodeFast(typ, SchemaVersion(typ), b, nil)
					require.Equal(t, fastOK, st, "%x", b)
					require.Equal(t, want, got, "%x", b)
					viaAPI, err := DecodePayload(typ, SchemaVersion(typ), b)
					requireAPIAgrees(t, want, viaAPI, err)
					shared, err := dec.Decode(typ, SchemaVersion(typ), b)
					requireAPIAgrees(t, want, shared, err)
				}
			}
		})
	}
}

// requireAPIAgrees requires that DecodePayload (or a Decoder), given bytes the reference decodes to want,
// answered want, or ErrBadPayload when want is a payload that refuses itself (checked).
func requireAPIAgrees(t testing.TB, want, got any, err error) {
	t.Helper()
	if v, ok := want.(validator); ok && v.Validate() != nil {
		require.ErrorIs(t, err, ErrBadPayload)
		require.Nil(t, got)
		return
	}
	require.NoError(t, err)
	require.Equal(t, want, got)
}

func TestFastDecodeNilAndEmptySlices(t *testing.T) {
	for _, catalog := range [][]string{nil, {}, {"a"}} {
		b, err := EncodePayload(&EngineConfigured{ModelCatalog: catalog})
		require.NoError(t, err)
		got, st := decodeFast(TypeEngineConfigured, 1, b, nil)
		require.Equal(t, fastOK, st)
		require.Equal(t, catalog == nil, got.(*EngineConfigured).ModelCatalog == nil)
		require.Equal(t, catalog, got.(*EngineConfigured).ModelCatalog)
	}
}

func TestFastDecodeLeavesOddEncodingsToReflection(t *testing.T) {
	admitted := func(tail ...byte) []byte {
		return append([]byte{0x82, 0xa6, 't', 'a', 's', 'k', 'I', 'd', 0xa1, 'x', 0xa6, 'p', 'o', 'l', 'i', 'c',
			'y'}, tail...)
	}
	cases := map[string]struct {
		b  []byte
		st fastStatus
	}{
		"nil payload":     {[]byte{0xc0}, fastFallback},
		"struct as array": {[]byte{0x91, 0xa1, 'x'}, fastFallback},
		"duplicate key": {[]byte{0x82, 0xa6, 't', 'a', 's', 'k', 'I', 'd', 0xa1, 'x', 0xa6, 't', 'a', 's', 'k',
			'I', 'd', 0xa1, 'y'}, fastFallback},
		"nested array struct": {admitted(0x90), fastFallback},
		"float into an int": {[]byte{0x81, 0xaa, 'c', 'h', 'i', 'l', 'd', 'D', 'e', 'p', 't', 'h', 0xcb, 0, 0, 0,
			0, 0, 0, 0, 0}, fastFallback},
		"trailing bytes":       {[]byte{0x80, 0xc0}, fastFallback},
		"reserved code":        {[]byte{0x81, 0xa1, 'z', 0xc1}, fastFallback},
		"map longer than data": {[]byte{0xdf, 0xff, 0xff, 0xff, 0xff}, fastBad},
		"string past the end": {[]byte{0x81, 0xa6, 't', 'a', 's', 'k', 'I', 'd', 0xdb, 0x7f, 0xff, 0xff, 0xff,
			'x'}, fastBad},
		"skipped huge array": {[]byte{0x81, 0xa1, 'z', 0xdd, 0xff, 0xff, 0xff, 0xff}, fastBad},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, st := decodeFast(TypeDelegateAdmitted, 1, c.b, nil)
			require.Equal(t, c.st, st)
			require.Equal(t, c.st != fastBad, LengthsFit(c.b))
			_, err := DecodePayload(TypeDelegateAdmitted, 1, c.b)
			if c.st == fastBad {
				require.ErrorIs(t, err, ErrBadPayload)
			}
		})
	}
}

func TestFastDecodeHugeArrayDoesNotAllocate(t *testing.T) {
	// options: array32 of 2^32-1 strings, with two bytes behind it.
	b := []byte{0x81, 0xa7, 'o', 'p', 't', 'i', 'o', 'n', 's', 0xdd, 0xff, 0xff, 0xff, 0xff, 0xa0, 0xa0}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := DecodePayload(TypeAskRequested, 1, b)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, ErrBadPayload)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<10),
		"allocated for a length the payload cannot hold")
}

func FuzzFastDecode(f *testing.F) {
	types := Types()
	rng := rand.New(rand.NewPCG(3, 4))
	for i, typ := range types {
		p := NewPayload(typ)
		randomFill(rng, reflect.ValueOf(p).Elem())
		b, err := EncodePayload(p)
		require.NoError(f, err)
		f.Add(uint8(i), b)
		f.Add(uint8(i), (&variantWriter{rng: rng}).payload(reflect.ValueOf(p).Elem()))
	}
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		typ := types[int(which)%len(types)]
		got, st := decodeFast(typ, SchemaVersion(typ), b, nil)
		_, _ = DecodePayload(typ, SchemaVersion(typ), b) // never panics
		if got != nil {
			shared, err := NewDecoder().Decode(typ, SchemaVersion(typ), b)
			requireAPIAgrees(t, got, shared, err)
		}
		if !LengthsFit(b) {
			// Reflection would allocate for the forged length before
			// failing; DecodePayload never hands it such bytes.
			require.NotEqual(t, fastOK, st)
			return
		}
		require.NotEqual(t, fastBad, st, "LengthsFit and the fast path disagree")
		want, err := reflectDecode(typ, b)
		if st == fastOK {
			require.NoError(t, err, "the fast path accepted what reflection refuses")
			require.Equal(t, want, got)
		}
		if err == nil {
			for _, f := range stringFields(typ) {
				requirePayloadStringAgrees(t, typ, b, want, f) // and PayloadString reads what both read
			}
		}
	})
}

// randomFill sets v to random values, zero ones included (they decide
// omitempty and nil handling).
func randomFill(rng *rand.Rand, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if rng.IntN(3) == 0 {
			v.SetZero()
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		randomFill(rng, v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			randomFill(rng, v.Field(i))
		}
	case reflect.String:
		v.SetString(randomString(rng))
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Int, reflect.Int64:
		v.SetInt(randomInt(rng))
	case reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(rng.Uint32()) & (1<<(v.Type().Bits()) - 1))
	case reflect.Float64:
		switch rng.IntN(4) {
		case 0:
			v.SetFloat(0)
		case 1:
			v.SetFloat(float64(rng.IntN(1000)))
		case 2:
			v.SetFloat(float64(float32(rng.Float64())))
		default:
			v.SetFloat(rng.NormFloat64() * 1e6)
		}
	case reflect.Slice:
		switch n := rng.IntN(5); n {
		case 0:
			v.SetZero()
		default:
			s := reflect.MakeSlice(v.Type(), n-1, n-1)
			for i := range n - 1 {
				randomFill(rng, s.Index(i))
			}
			v.Set(s)
		}
	default:
		panic("randomFill: unhandled kind " + v.Kind().String())
	}
}

func randomString(rng *rand.Rand) string {
	n := 0
	switch rng.IntN(6) {
	case 0:
	case 1:
		n = 32 + rng.IntN(300) // str8 and str16 territory
	default:
		n = 1 + rng.IntN(31)
	}
	const alphabet = "abcXYZ019-_./ é☃"
	r := []rune(alphabet)
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteRune(r[rng.IntN(len(r))])
	}
	return sb.String()
}

func randomInt(rng *rand.Rand) int64 {
	switch rng.IntN(7) {
	case 0:
		return 0
	case 1:
		return int64(rng.IntN(128))
	case 2:
		return -int64(rng.IntN(40))
	case 3:
		return int64(rng.Uint64())
	case 4:
		return []int64{math.MaxInt64, math.MinInt64, math.MaxInt32, math.MinInt32, 255, 256, -129, 65535,
			65536}[rng.IntN(9)]
	default:
		return rng.Int64N(1<<40) - 1<<39
	}
}

// variantWriter encodes a payload struct as a msgpack map the way any valid
// writer might, with the same meaning as EncodePayload's bytes.
type variantWriter struct {
	rng *rand.Rand
	b   []byte
}

func (w *variantWriter) payload(v reflect.Value) []byte {
	w.b = nil
	w.structMap(v)
	return w.b
}

func (w *variantWriter) structMap(v reflect.Value) {
	type entry struct {
		key string
		val reflect.Value // invalid: an unknown key
	}
	var entries []entry
	for i := range v.NumField() {
		f := v.Type().Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
		if v.Field(i).IsZero() && w.rng.IntN(3) == 0 {
			continue // an absent key decodes to the zero value
		}
		entries = append(entries, entry{key, v.Field(i)})
	}
	for range w.rng.IntN(3) {
		entries = append(entries, entry{key: "x-unknown" + string(rune('a'+w.rng.IntN(26)))})
	}
	w.rng.Shuffle(len(entries), func(i, j int) { entries[i], entries[j] = entries[j], entries[i] })
	w.mapHeader(len(entries))
	seen := map[string]bool{}
	for _, e := range entries {
		if !e.val.IsValid() {
			if seen[e.key] {
				e.key += "2" // unknown keys may not repeat either: that is a fallback
			}
			seen[e.key] = true
			w.str(e.key)
			w.unknown(0)
			continue
		}
		w.str(e.key)
		w.value(e.val)
	}
}

func (w *variantWriter) mapHeader(n int) {
	switch {
	case n < 16 && w.rng.IntN(2) == 0:
		w.b = append(w.b, 0x80|byte(n))
	case w.rng.IntN(2) == 0:
		w.b = binary.BigEndian.AppendUint16(append(w.b, 0xde), uint16(n))
	default:
		w.b = binary.BigEndian.AppendUint32(append(w.b, 0xdf), uint32(n))
	}
}

func (w *variantWriter) value(v reflect.Value) {
	if v.IsZero() && v.Kind() != reflect.Slice && w.rng.IntN(4) == 0 {
		w.b = append(w.b, 0xc0) // nil decodes to the zero value
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			w.b = append(w.b, 0xc0)
			return
		}
		if v.Elem().Kind() != reflect.Struct {
			w.value(v.Elem()) // an optional scalar: present, maybe zero
			return
		}
		w.structMap(v.Elem())
	case reflect.String:
		w.str(v.String())
	case reflect.Bool:
		if v.Bool() {
			w.b = append(w.b, 0xc3)
		} else {
			w.b = append(w.b, 0xc2)
		}
	case reflect.Int, reflect.Int64:
		w.int(v.Int())
	case reflect.Uint16, reflect.Uint32, reflect.Uint64:
		w.int(int64(v.Uint()))
	case reflect.Float64:
		w.float(v.Float())
	case reflect.Slice:
		if v.IsNil() {
			w.b = append(w.b, 0xc0)
			return
		}
		n := v.Len()
		switch {
		case n < 16 && w.rng.IntN(2) == 0:
			w.b = append(w.b, 0x90|byte(n))
		case w.rng.IntN(2) == 0:
			w.b = binary.BigEndian.AppendUint16(append(w.b, 0xdc), uint16(n))
		default:
			w.b = binary.BigEndian.AppendUint32(append(w.b, 0xdd), uint32(n))
		}
		for i := range n {
			w.value(v.Index(i))
		}
	default:
		panic("variantWriter: unhandled kind " + v.Kind().String())
	}
}

// str writes s in any string or binary format wide enough for it.
func (w *variantWriter) str(s string) {
	n := len(s)
	var heads [][]byte
	if n < 32 {
		heads = append(heads, []byte{0xa0 | byte(n)})
	}
	if n < 1<<8 {
		heads = append(heads, []byte{0xd9, byte(n)}, []byte{0xc4, byte(n)})
	}
	heads = append(heads,
		binary.BigEndian.AppendUint16([]byte{0xda}, uint16(n)),
		binary.BigEndian.AppendUint16([]byte{0xc5}, uint16(n)),
		binary.BigEndian.AppendUint32([]byte{0xdb}, uint32(n)),
		binary.BigEndian.AppendUint32([]byte{0xc6}, uint32(n)))
	w.b = append(append(w.b, heads[w.rng.IntN(len(heads))]...), s...)
}

// int writes v in any integer format that holds it.
func (w *variantWriter) int(v int64) {
	var forms [][]byte
	if v >= -32 && v <= 127 {
		forms = append(forms, []byte{byte(int8(v))})
	}
	if v >= 0 {
		u := uint64(v)
		if u < 1<<8 {
			forms = append(forms, []byte{0xcc, byte(u)})
		}
		if u < 1<<16 {
			forms = append(forms, binary.BigEndian.AppendUint16([]byte{0xcd}, uint16(u)))
		}
		if u < 1<<32 {
			forms = append(forms, binary.BigEndian.AppendUint32([]byte{0xce}, uint32(u)))
		}
		forms = append(forms, binary.BigEndian.AppendUint64([]byte{0xcf}, u))
	}
	if v >= math.MinInt8 && v <= math.MaxInt8 {
		forms = append(forms, []byte{0xd0, byte(int8(v))})
	}
	if v >= math.MinInt16 && v <= math.MaxInt16 {
		forms = append(forms, binary.BigEndian.AppendUint16([]byte{0xd1}, uint16(int16(v))))
	}
	if v >= math.MinInt32 && v <= math.MaxInt32 {
		forms = append(forms, binary.BigEndian.AppendUint32([]byte{0xd2}, uint32(int32(v))))
	}
	forms = append(forms, binary.BigEndian.AppendUint64([]byte{0xd3}, uint64(v)))
	w.b = append(w.b, forms[w.rng.IntN(len(forms))]...)
}

// float writes f as a double, a float32 when that is exact, or an integer
// when f is a whole number: reflection reads all three into a float64.
func (w *variantWriter) float(f float64) {
	switch {
	case f == math.Trunc(f) && math.Abs(f) < 1<<62 && w.rng.IntN(3) == 0:
		w.int(int64(f))
	case float64(float32(f)) == f && w.rng.IntN(2) == 0:
		w.b = binary.BigEndian.AppendUint32(append(w.b, 0xca), math.Float32bits(float32(f)))
	default:
		w.b = binary.BigEndian.AppendUint64(append(w.b, 0xcb), math.Float64bits(f))
	}
}

// unknown writes a random value of any type, nested a little.
func (w *variantWriter) unknown(depth int) {
	switch k := w.rng.IntN(10); {
	case k == 0 && depth < 3:
		n := w.rng.IntN(3)
		w.mapHeader(n)
		for i := range n {
			w.str(string(rune('k' + i)))
			w.unknown(depth + 1)
		}
	case k == 1 && depth < 3:
		n := w.rng.IntN(3)
		w.b = append(w.b, 0x90|byte(n))
		for range n {
			w.unknown(depth + 1)
		}
	case k == 2:
		w.b = append(w.b, 0xd6, 0xff, 1, 2, 3, 4) // fixext 4 (a timestamp)
	case k == 3:
		w.b = append(w.b, 0xc7, 3, 7, 'a', 'b', 'c') // ext 8
	case k == 4:
		w.b = append(w.b, 0xc0)
	case k == 5:
		w.float(w.rng.NormFloat64())
	case k == 6:
		w.b = append(w.b, 0xc3)
	case k == 7:
		w.int(randomInt(w.rng))
	default:
		w.str(randomString(w.rng))
	}
}

// BenchmarkDecodePayload compares the generated and the reflection
// decoders on a typical admission.
//
//	go test ./events -run '^$' -bench DecodePayload
func BenchmarkDecodePayload(b *testing.B) {
	p := &DelegateAdmitted{TaskID: "01_work", SubID: "gc-00001234", ChildDepth: 2, Role: "analyst",
		ReservedTokens: 100, Model: "sonnet", TimeoutSec: 600, Deadline: 1790000000000, Cwd: "/srv/bench",
		Title: "explore", Description: "explore", Prompt: "look around the package", ParentRole: "explorer"}
	raw, err := EncodePayload(p)
	require.NoError(b, err)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodePayload(TypeDelegateAdmitted, 1, raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("shared", func(b *testing.B) {
		b.ReportAllocs()
		dec := NewDecoder()
		for b.Loop() {
			if _, err := dec.Decode(TypeDelegateAdmitted, 1, raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reflection", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := decodeInto(new(DelegateAdmitted), raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestDecoderSharesRepeatedStrings(t *testing.T) {
	dec := NewDecoder()
	b, err := EncodePayload(&BudgetReserved{TaskID: "01_work", SubID: "gc-00000001", Tokens: 5})
	require.NoError(t, err)
	p1, err := dec.Decode(TypeBudgetReserved, 1, b)
	require.NoError(t, err)
	p2, err := dec.Decode(TypeBudgetReserved, 1, b)
	require.NoError(t, err)
	require.Equal(t, p1, p2)
	s1, s2 := p1.(*BudgetReserved).SubID, p2.(*BudgetReserved).SubID
	require.Same(t, unsafe.StringData(s1), unsafe.StringData(s2))
	var nilDec *Decoder
	p3, err := nilDec.Decode(TypeBudgetReserved, 1, b)
	require.NoError(t, err)
	require.Equal(t, p1, p3)
}

// TestFastDecodeRefusesEveryPayloadCutShort: a payload cut anywhere short of its end (a length that runs past the
// bytes the payload holds, by as little as one) is refused, ErrBadPayload, and read no further than its last byte:
// the bytes after a payload belong to whatever holds it.
func TestFastDecodeRefusesEveryPayloadCutShort(t *testing.T) {
	for _, typ := range fastTypes(t) {
		t.Run(typ, func(t *testing.T) {
			b, err := EncodePayload(filled(typ))
			require.NoError(t, err)
			for n := range len(b) {
				cut := b[:n:n] // NB: no capacity past the cut: a read beyond it panics rather than read b's bytes
				got, st := decodeFast(typ, SchemaVersion(typ), cut, nil)
				require.NotEqual(t, fastOK, st, "cut to %d of %d bytes: %v", n, len(b), got)
				_, err := DecodePayload(typ, SchemaVersion(typ), cut)
				require.ErrorIs(t, err, ErrBadPayload, "cut to %d of %d bytes", n, len(b))
			}
		})
	}
}
