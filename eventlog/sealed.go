package eventlog

import (
	"encoding/binary"
	"hash/crc32"
)

// Every value other than an event record is "sealed": a version byte and a
// crc32c over the payload, so a flipped byte anywhere in the store is caught.
//
//	[0] sealVersion  [1:5] crc32c(payload) BE  [5:] payload
const sealVersion = 1

func seal(payload []byte) []byte {
	v := make([]byte, 5+len(payload))
	sealInto(v, payload)
	return v
}

// sealInto writes payload sealed into v, which is exactly 5+len(payload)
// bytes long.
func sealInto(v, payload []byte) {
	copy(v[5:], payload)
	sealInPlace(v)
}

// sealInPlace seals v, whose payload is already in place after the 5
// bytes of seal.
func sealInPlace(v []byte) {
	v[0] = sealVersion
	binary.BigEndian.PutUint32(v[1:5], crc32.Checksum(v[5:], castagnoli))
}

// unseal returns the payload of a sealed value; the result aliases value.
func unseal(key, value []byte) ([]byte, error) {
	if len(value) < 5 {
		return nil, corruptf(0, key, "value of %d bytes is shorter than its header", len(value))
	}
	if value[0] != sealVersion {
		return nil, corruptf(0, key, "unknown value version %d", value[0])
	}
	p := value[5:]
	if want, got := binary.BigEndian.Uint32(value[1:5]), crc32.Checksum(p, castagnoli); want != got {
		return nil, corruptf(0, key, "checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	return p, nil
}

// head is the last committed position and its hash, persisted in the same
// batch as the records it covers.
type head struct {
	Position uint64
	Hash     [32]byte
}

func (h head) encode() []byte {
	p := make([]byte, 8+32)
	binary.BigEndian.PutUint64(p, h.Position)
	copy(p[8:], h.Hash[:])
	return seal(p)
}

func decodeHead(value []byte) (head, error) {
	p, err := unseal(keyHead, value)
	if err != nil {
		return head{}, err
	}
	if len(p) != 40 {
		return head{}, corruptf(0, keyHead, "head of %d bytes, want 40", len(p))
	}
	var h head
	h.Position = binary.BigEndian.Uint64(p)
	copy(h.Hash[:], p[8:])
	return h, nil
}

func encodeFormat(v uint32) []byte { return seal(binary.BigEndian.AppendUint32(nil, v)) }

func decodeFormat(value []byte) (uint32, error) {
	p, err := unseal(keyFormat, value)
	if err != nil {
		return 0, err
	}
	if len(p) != 4 {
		return 0, corruptf(0, keyFormat, "format of %d bytes, want 4", len(p))
	}
	return binary.BigEndian.Uint32(p), nil
}
