package projections

import "math/bits"

// pendingIndex follows which entries of an append-only list are still pending, for a list whose entries leave the
// pending state once and never return to it (a mailbox's messages become acknowledged, a run's asks answered or
// timed out). It is a Fenwick tree over
// the entries' pending flags: an append, a settlement, the count of the pending entries before an ordinal and the
// next pending entry at or after one each cost O(log n). So a page of the pending entries costs its own entries
// however many settled ones lie between them or before its cursor: a worker that acknowledges its messages piles up
// settled entries in its own box, by the thousand, and every page of msg.inbox it asks for is read under the
// engine's read lock that the publisher waits for. The count of pending entries is a page's total.
//
// Its content is a function of the flags alone, so a box folded from events and one decoded from a snapshot hold
// the same index.
type pendingIndex struct {
	// sums[i-1] counts the pending entries among ordinals [i-lowbit(i), i) (entries i-lowbit(i)+1..i, 1-based).
	sums    []int32
	pending int
}

// appended records that a new last entry was added, pending or not (a snapshot's entries come back settled).
func (x *pendingIndex) appended(pending bool) {
	i := len(x.sums) + 1
	var v int32
	if pending {
		v = 1
		x.pending++
	}
	// NB: node i covers entries i-lowbit(i)+1..i: its own flag and the nodes that tile the entries before it.
	for j := i - 1; j > i-i&-i; j -= j & -j {
		v += x.sums[j-1]
	}
	x.sums = append(x.sums, v)
}

// settled records that pending entry ord (0-based) stopped pending.
func (x *pendingIndex) settled(ord int) {
	x.pending--
	for i := ord + 1; i <= len(x.sums); i += i & -i {
		x.sums[i-1]--
	}
}

// before counts the pending entries of ordinal below n.
func (x *pendingIndex) before(n int) int {
	s := 0
	for i := min(n, len(x.sums)); i > 0; i -= i & -i {
		s += int(x.sums[i-1])
	}
	return s
}

// next is the ordinal of the first pending entry at or after from, or the list's length when none is.
func (x *pendingIndex) next(from int) int { return x.kth(x.before(from) + 1) }

// kth is the ordinal of the k-th pending entry (1-based), or the list's length when fewer are pending.
func (x *pendingIndex) kth(k int) int {
	n := len(x.sums)
	if k > x.pending {
		return n
	}
	pos := 0
	for step := 1 << (bits.Len(uint(n)) - 1); step > 0; step >>= 1 {
		if pos+step <= n && int(x.sums[pos+step-1]) < k {
			pos += step
			k -= int(x.sums[pos-1])
		}
	}
	return pos
}

func (x pendingIndex) clone() pendingIndex {
	return pendingIndex{sums: cloneSlice(x.sums), pending: x.pending}
}
