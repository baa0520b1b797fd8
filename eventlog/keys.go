package eventlog

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
)

// Key prefixes. One byte each keeps keys short: every byte of a key is paid
// for in the memtable, the WAL and every block index.
const (
	prefixEvent    = 'e' // e | pos:8 BE                     → event record
	prefixStream   = 's' // s | uvarint len | stream | first ver:8 → positions (index.go)
	prefixCommand  = 'c' // c | command id                   → outcome (format ≤ 2 only)
	prefixOutcome  = 'o' // o | uvarint len | principal | command id → outcome (format 3)
	prefixSnapshot = 'n' // n | pos:8 BE | chunk:4 BE → chunk (snapshot_chunks.go); n | pos:8 BE → whole (format ≤ 3)
	prefixMeta     = 'm' // m | name                         → metadata
)

var (
	keyFormat = []byte("mformat")
	keyHead   = []byte("mhead")
)

func eventKey(pos uint64) []byte { return appendEventKey(make([]byte, 0, 9), pos) }

func appendEventKey(dst []byte, pos uint64) []byte {
	dst = append(dst, prefixEvent)
	return binary.BigEndian.AppendUint64(dst, pos)
}

// streamPrefix is s | uvarint(len) | stream. The length prefix keeps one
// stream's keys from interleaving with another's whose name it prefixes.
func appendStreamPrefix(dst []byte, stream string) []byte {
	return appendPrefixedStream(dst, prefixStream, stream)
}

// appendPrefixedStream is prefix | uvarint(len) | stream: the head of every
// key that files something under a stream and a number (the index, the
// summaries).
func appendPrefixedStream(dst []byte, prefix byte, stream string) []byte {
	dst = append(dst, prefix)
	dst = binary.AppendUvarint(dst, uint64(len(stream)))
	return append(dst, stream...)
}

// parsePrefixedName returns the name of a key appendPrefixedStream made
// with prefix and nothing after it; ok is false for a malformed key.
func parsePrefixedName(k []byte, prefix byte) (name string, ok bool) {
	if len(k) < 2 || k[0] != prefix {
		return "", false
	}
	n, w, ok := keyLen(k[1:])
	if !ok || uint64(len(k)-1-w) != n {
		return "", false
	}
	return string(k[1+w:]), true
}

func appendStreamKey(dst []byte, stream string, version uint64) []byte {
	dst = appendStreamPrefix(dst, stream)
	return binary.BigEndian.AppendUint64(dst, version)
}

// parseStreamKey splits an index key; ok is false for a malformed key.
func parseStreamKey(k []byte) (stream string, version uint64, ok bool) {
	return parsePrefixedStreamKey(k, prefixStream)
}

// parsePrefixedStreamKey splits prefix | uvarint(len) | stream | n:8 BE;
// ok is false for a malformed key or another prefix.
func parsePrefixedStreamKey(k []byte, prefix byte) (stream string, n uint64, ok bool) {
	if len(k) < 1+1+8 || k[0] != prefix {
		return "", 0, false
	}
	// NB: the bytes after the length are compared with it, not 1+w+l+8
	// with len(k): that sum wraps for a length near 2^64.
	l, w, ok := keyLen(k[1:])
	if !ok || len(k)-1-w < 8 || l != uint64(len(k)-1-w-8) {
		return "", 0, false
	}
	s := k[1+w : 1+w+int(l)]
	return string(s), binary.BigEndian.Uint64(k[len(k)-8:]), true
}

// keyLen reads the length at the head of b, a uvarint in the one encoding
// binary.AppendUvarint gives it: a longer encoding of the same number (a
// 0x80 byte before the last) would give one key a second spelling, which
// a store read back could hold beside the first.
func keyLen(b []byte) (n uint64, w int, ok bool) {
	n, w = binary.Uvarint(b)
	return n, w, w > 0 && w == (bits.Len64(n|1)+6)/7
}

// legacyCommandKey is the outcome key of formats 1 and 2, which knew no
// principals; only the step to format 3 and Verify of an older store read
// it.
func legacyCommandKey(id string) []byte {
	k := make([]byte, 0, 1+len(id))
	k = append(k, prefixCommand)
	return append(k, id...)
}

// outcomeKey is o | uvarint(len principal) | principal | command id. The
// length prefix makes the pair unambiguous: no two (principal, id) pairs
// share a key, whatever bytes either holds. NB: a new prefix rather than
// 'c' with a new layout, so that a key of each layout can never be
// mistaken for the other while the step to format 3 runs.
func outcomeKey(principal, id string) []byte {
	return appendOutcomeKey(make([]byte, 0, 1+binary.MaxVarintLen16+len(principal)+len(id)), principal, id)
}

func appendOutcomeKey(dst []byte, principal, id string) []byte {
	dst = append(dst, prefixOutcome)
	dst = binary.AppendUvarint(dst, uint64(len(principal)))
	dst = append(dst, principal...)
	return append(dst, id...)
}

// parseOutcomeKey splits an outcome key; ok is false for a malformed key.
func parseOutcomeKey(k []byte) (principal, id string, ok bool) {
	if len(k) < 2 || k[0] != prefixOutcome {
		return "", "", false
	}
	n, w, ok := keyLen(k[1:])
	if !ok || uint64(len(k)-1-w) < n {
		return "", "", false
	}
	return string(k[1+w : 1+w+int(n)]), string(k[1+w+int(n):]), true
}

func snapshotKey(pos uint64) []byte {
	k := make([]byte, 0, 9)
	k = append(k, prefixSnapshot)
	return binary.BigEndian.AppendUint64(k, pos)
}

// prefixUpper returns the smallest key greater than every key with prefix p.
func prefixUpper(p []byte) []byte {
	u := append([]byte(nil), p...)
	for i := len(u) - 1; i >= 0; i-- {
		if u[i] != 0xff {
			u[i]++
			return u[:i+1]
		}
	}
	return nil // every byte 0xff: no upper bound
}

// keyString prints a key for error messages and tools.
func keyString(k []byte) string {
	if len(k) == 0 {
		return "<empty key>"
	}
	switch k[0] {
	case prefixEvent:
		if len(k) == 9 {
			return "e/" + strconv.FormatUint(binary.BigEndian.Uint64(k[1:]), 10)
		}
	case prefixSnapshot:
		if len(k) == 9 {
			return "n/" + strconv.FormatUint(binary.BigEndian.Uint64(k[1:]), 10)
		}
		if len(k) == snapshotChunkKeyLen {
			return "n/" + strconv.FormatUint(binary.BigEndian.Uint64(k[1:9]), 10) + "/" +
				strconv.FormatUint(uint64(binary.BigEndian.Uint32(k[9:])), 10)
		}
	case prefixStream:
		if s, v, ok := parseStreamKey(k); ok {
			return fmt.Sprintf("s/%q/%d", s, v)
		}
	case prefixCommand:
		return fmt.Sprintf("c/%q", k[1:])
	case prefixOutcome:
		if p, id, ok := parseOutcomeKey(k); ok {
			return fmt.Sprintf("o/%q/%q", p, id)
		}
	case prefixView:
		if s, ok := parseViewKey(k); ok {
			return fmt.Sprintf("v/%q", s)
		}
	case prefixTally:
		if p, ok := parseTallyKey(k); ok {
			return fmt.Sprintf("t/%q", p)
		}
	case prefixGroupTally:
		if g, ok := parsePrefixedName(k, prefixGroupTally); ok {
			return fmt.Sprintf("g/%q", g)
		}
	case prefixCatalog:
		return fmt.Sprintf("r/%q", k[1:])
	case prefixMeta:
		return "m/" + string(k[1:])
	}
	return fmt.Sprintf("%q", k)
}
