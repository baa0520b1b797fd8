package projections

import (
	"io"
	"testing"

	"github.com/crewlog/crewlog/events"
)

// BenchmarkApply folds a realistic event mix (see realisticHistory) into a
// fresh state; events/s is the replay rate of the fold alone, without
// storage or payload decoding. "100k-one-run" folds the same events as one
// run, as a long run that keeps every delegation and message grows (the
// benchmark's one-run cells).
func BenchmarkApply(b *testing.B) {
	for _, n := range []struct {
		name   string
		n      int
		oneRun bool
	}{{"100k", 100_000, false}, {"100k-one-run", 100_000, true}, {"1M", 1_000_000, false}} {
		b.Run(n.name, func(b *testing.B) {
			evs := realisticHistory(n.n)
			if n.oneRun {
				evs = oneRunOf(evs)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				s := New()
				for _, ev := range evs {
					Apply(s, ev)
				}
			}
			perOp := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(len(evs))/perOp, "events/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(evs)), "ns/event")
		})
	}
}

// BenchmarkSnapshot measures encoding and decoding the state of a 100k-event
// history.
func BenchmarkSnapshot(b *testing.B) {
	s := fold(realisticHistory(100_000))
	enc, err := EncodeSnapshot(s)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			if _, err := EncodeSnapshot(s); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(enc)), "bytes")
	})
	// The encoding a daemon's snapshot makes (NewSnapshotEncoder copies the
	// records, WriteTo writes them in pieces), on a state whose 100k events
	// are one run: its encoding once grew a buffer to the whole run.
	oneRun := fold(oneRunOf(realisticHistory(100_000)))
	b.Run("copy-and-write-one-run", func(b *testing.B) {
		for b.Loop() {
			if _, err := NewSnapshotEncoder(oneRun).WriteTo(io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeSnapshot(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("clone", func(b *testing.B) {
		for b.Loop() {
			s.Clone()
		}
	})
}

// BenchmarkCloneRun measures copying one run that holds the records of a
// 100k-event history (its runs' streams folded into one): what a
// copy-on-write publication would pay, per group, for a long run that every
// group touches, against the second fold of the group's events that
// left-right publication pays (BenchmarkApply's ns/event).
func BenchmarkCloneRun(b *testing.B) {
	big := fold(oneRunOf(realisticHistory(100_000))).runs["R"]
	for b.Loop() {
		big.clone()
	}
	b.ReportMetric(float64(big.run.Usage.Events), "run-events")
	b.ReportMetric(float64(len(big.dels)), "delegations")
}

// oneRunOf puts every event of evs but the engine's in one run, "R": a
// long run's history (evs is changed in place and returned).
func oneRunOf(evs []events.Event) []events.Event {
	for i := range evs {
		if evs[i].Stream != events.EngineStream {
			evs[i].Stream = "R"
		}
	}
	return evs
}
