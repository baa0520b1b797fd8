package events

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// The generated encoders replace msgpack's reflection encoder, whose bytes
// are in every stored log and hashed into its chain: for every payload, the
// two must write the same bytes.

// reflectEncode is the reference: what EncodePayload wrote before the
// encoders were generated.
func reflectEncode(t testing.TB, p any) []byte {
	b, err := msgpack.Marshal(p)
	require.NoError(t, err)
	return b
}

func TestGeneratedEncoderMatchesReflection(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	rounds := 300
	if testing.Short() {
		rounds = 30
	}
	for _, typ := range Types() {
		t.Run(typ, func(t *testing.T) {
			check := func(p any) {
				got, err := EncodePayload(p)
				require.NoError(t, err)
				require.Equal(t, reflectEncode(t, p), got, "%#v", p)
				// A struct value encodes as its pointer does.
				byValue, err := EncodePayload(reflect.ValueOf(p).Elem().Interface())
				require.NoError(t, err)
				require.Equal(t, got, byValue)
			}
			check(NewPayload(typ))
			check(filled(typ))
			for range rounds {
				p := NewPayload(typ)
				randomFill(rng, reflect.ValueOf(p).Elem())
				check(p)
			}
		})
	}
}

// TestGeneratedEncoderWidths covers the lengths and values the random
// payloads reach rarely or never: every header width and float oddities.
func TestGeneratedEncoderWidths(t *testing.T) {
	long := strings.Repeat("x", 70_000) // str32
	many := make([]string, 70_000)      // array32
	for i := range many {
		many[i] = "m"
	}
	nan := math.NaN()
	cases := map[string]any{
		"str8":          &RunCreated{Team: strings.Repeat("t", 200)},
		"str16":         &RunCreated{Goal: strings.Repeat("g", 300)},
		"str32":         &MailboxAppended{Body: long},
		"array16":       &EngineConfigured{ModelCatalog: many[:20]},
		"array32":       &EngineConfigured{ModelCatalog: many},
		"empty array":   &EngineConfigured{ModelCatalog: []string{}},
		"omitted empty": &AskRequested{Options: []string{}},
		"map16":         &Policy{Metered: true, ParentStatus: "s", Role: "r"},
		"nested nil":    &DelegateRejected{Policy: nil},
		"nested zero":   &DelegateRejected{Policy: &Policy{}},
		"negative zero": &TaskUsage{Cost: math.Copysign(0, -1)},
		"nan":           &TaskUsage{Cost: math.NaN()},
		"infinity":      &TaskUsage{Cost: math.Inf(-1)},
		"optional zero": &RunCreated{BudgetTotal: new(int64), BudgetWarning: new(float64)},
		"optional nan":  &RunCreated{BudgetAbort: &nan},
		"int boundaries": &Policy{Depth: -33, ChildDepth: -32, MaxDepth: 127, Held: 128, Capacity: math.MinInt64,
			CatalogSize: math.MaxInt64, Overlapping: math.MinInt16 - 1},
		"uint32":      &StoreMigrated{From: math.MaxUint32, To: 0},
		"nil pointer": (*TaskStarted)(nil),
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			if _, ok := TypeOf(p); !ok {
				// Policy is not a payload; its encoder is reached
				// through delegate.rejected.
				p = &DelegateRejected{TaskID: "t", Policy: p.(*Policy)}
			}
			got, err := EncodePayload(p)
			require.NoError(t, err)
			require.Equal(t, reflectEncode(t, p), got)
		})
	}
}

func TestEveryPayloadHasAGeneratedCodec(t *testing.T) {
	for _, typ := range Types() {
		_, ok := appendPayload(nil, NewPayload(typ))
		require.True(t, ok, "%s: no generated encoder", typ)
		if f, ok := payloadDecoders[typ]; ok {
			require.Equal(t, SchemaVersion(typ), f.version, "%s: a decoder for a version that is not current", typ)
		} else {
			// Only a type with a field the fast reader does not take
			// (uint32) may be left to reflection.
			require.Equal(t, TypeStoreMigrated, typ, "%s: no generated decoder", typ)
		}
	}
}

// BenchmarkEncodePayload compares the generated and the reflection encoders
// on a typical admission.
//
//	go test ./events -run '^$' -bench EncodePayload
func BenchmarkEncodePayload(b *testing.B) {
	p := &DelegateAdmitted{TaskID: "01_work", SubID: "gc-00001234", ChildDepth: 2, Role: "analyst",
		ReservedTokens: 100, Model: "sonnet", TimeoutSec: 600, Deadline: 1790000000000, Cwd: "/srv/bench",
		Title: "explore", Description: "explore", Prompt: "look around the package", ParentRole: "explorer"}
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := EncodePayload(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reflection", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := msgpack.Marshal(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
