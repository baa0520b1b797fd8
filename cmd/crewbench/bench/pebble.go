package bench

import (
	"encoding/binary"

	"github.com/crewlog/crewlog/cmd/crewbench/bench/plainpebble"
)

// pebbleSink writes a group as one synced Pebble batch: per event the
// record under 'e'|pos and the stream index 's'|stream|version → pos, the
// two keys every event log needs (and the key layout of pebble-perf.md).
type pebbleSink struct{ db *plainpebble.DB }

func openPebbleSink(dir string) (*pebbleSink, error) {
	db, err := plainpebble.Open(dir)
	if err != nil {
		return nil, err
	}
	return &pebbleSink{db: db}, nil
}

func (p *pebbleSink) Write(recs []sinkRecord, _ []byte) error {
	kvs := make([]plainpebble.KV, 0, 2*len(recs))
	for _, r := range recs {
		ek := binary.BigEndian.AppendUint64([]byte{'e'}, r.Pos)
		sk := append(binary.AppendUvarint([]byte{'s'}, uint64(len(r.Stream))), r.Stream...)
		sk = binary.BigEndian.AppendUint64(sk, r.Version)
		kvs = append(kvs, plainpebble.KV{Key: ek, Value: r.Bytes}, plainpebble.KV{Key: sk, Value: ek[1:]})
	}
	return p.db.Commit(kvs)
}

func (p *pebbleSink) ReadAll(fn func(decodedRecord) error) error {
	return p.db.Scan([]byte{'e'}, func(_, v []byte) error {
		r, _, err := nextRecord(v)
		if err != nil {
			return err
		}
		r.Payload = append([]byte(nil), r.Payload...)
		return fn(r)
	})
}

func (p *pebbleSink) Close() error { return p.db.Close() }
