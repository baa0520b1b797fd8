package projections

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// FuzzApplyDecodedEvent folds, into a random history at any point, an event of any type whose payload is whatever
// decodes from the fuzzer's bytes, as a replay decodes a record of the log: huge, negative or unknown values, ids
// that name records of other kinds. The fold never panics and keeps its invariants and the indexes beside its records
// (checkIndexes), and the state it folds is the same incrementally, from scratch and from a snapshot
// (checkFoldProperties).
//
//	go test ./projections -run '^$' -fuzz FuzzApplyDecodedEvent -fuzztime 2m
func FuzzApplyDecodedEvent(f *testing.F) {
	types := events.Types()
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 3 * len(types) {
		_, typ, p := randomEvent(rng)
		b, err := events.EncodePayload(p)
		require.NoError(f, err)
		f.Add(uint64(i), uint8(slices.Index(types, typ)), uint16(i*7), b)
	}
	f.Fuzz(func(t *testing.T, seed uint64, typeIndex uint8, at uint16, b []byte) {
		typ := types[int(typeIndex)%len(types)]
		p, err := events.DecodePayload(typ, events.SchemaVersion(typ), b)
		if err != nil {
			return
		}
		rng := rand.New(rand.NewPCG(seed, 11))
		evs := randomHistory(rng, 40+rng.IntN(80))
		k := int(at) % (len(evs) + 1)
		stream := fmt.Sprintf("run%d", seed%3)
		if typ == events.TypeEngineConfigured {
			stream = events.EngineStream
		}
		var h history
		for _, ev := range evs[:k] {
			h.addBy(ev.Actor, ev.Stream, ev.Type, ev.Payload)
		}
		h.add(stream, typ, p)
		for _, ev := range evs[k:] {
			h.addBy(ev.Actor, ev.Stream, ev.Type, ev.Payload)
		}
		s := checkFoldProperties(t, rng, seed, h.evs, rng.IntN(len(h.evs)+1))
		checkIndexes(t, s, typ)
		queryAll(t, s)
	})
}
