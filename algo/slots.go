package algo

import (
	"encoding/binary"
	"math/bits"
	"time"
)

// SlotState is one key's state under [SlidingWindow] and [SlidingLog]: the
// hits counted per slot of time (Period/60 for the window, one millisecond
// for the log) in the slots still counted. Slot j of a grid of den/num ns
// slots holds the times t (Unix ns) with floor(t*num/den) = j. The zero
// SlotState holds no hits.
type SlotState struct {
	// Count is the number of hits in the pairs of Pairs from Pairs.Head on.
	Count int64
	// Base is the slot before the first pair kept: the first pair's gap is
	// counted from it (0 for the first pair of a fresh state, whose slot
	// Base is).
	Base int64
	// Newest is the slot of the newest pair.
	Newest int64
	// Pairs holds the non-empty slots, oldest first.
	Pairs Pairs
}

// Pairs is the variable-size part of a [SlotState]: its non-empty slots,
// oldest first, each as the gap from the slot before it and its count,
// packed in varints (see appendPair): one byte for a slot right after the
// previous one with up to 33 hits, three for a lone hit minutes after the
// previous one.
type Pairs struct {
	// Buf holds the pairs; those before Head are dead.
	Buf []byte
	// Head is the offset in Buf of the oldest pair still kept.
	Head int32
	// Last is the offset in Buf of the newest pair.
	Last int32
}

// grid cuts time into slots: the time t (Unix ns) is in slot
// floor(t*num/den). A hit counted in slot j counts until slot j+window is
// over.
type grid struct {
	num, den int64
	window   int64
}

// slot returns the slot of t, computed without overflow.
func (g grid) slot(t int64) int64 {
	q := FloorDiv(t, g.den)
	hi, lo := bits.Mul64(uint64(t-q*g.den), uint64(g.num))
	s, _ := bits.Div64(hi, lo, uint64(g.den))
	return q*g.num + int64(s)
}

// start returns the first nanosecond of slot j: ceil(j*den/num).
func (g grid) start(j int64) int64 {
	q := FloorDiv(j, g.num)
	hi, lo := bits.Mul64(uint64(j-q*g.num), uint64(g.den))
	s, rem := bits.Div64(hi, lo, uint64(g.num))
	if rem > 0 {
		s++
	}
	return q*g.den + int64(s)
}

// death returns when hits counted in slot j stop counting.
func (g grid) death(j int64) int64 { return g.start(j + g.window + 1) }

// A pair is one uvarint v, whose two low bits say what the rest means,
// followed for pairTail by a second uvarint:
//
//	pairOne   gap v>>2, count 1
//	pairTail  gap v>>2, count 1 + the uvarint that follows
//	pairNext  gap 1, count 2 + v>>2
//
// so a slot right after the previous one with up to 33 hits takes one byte
// (the sliding window's usual case), and a lone hit a few minutes after the
// previous one three (the sliding log's). A count of 2^62+2 or more, whose
// count-2 would lose its top bits in v>>2, is always a pairTail, so that no
// count wraps; a gap is at most the grid's window (older slots are trimmed
// before a new one is added), far from 2^62.
const (
	pairOne = iota
	pairTail
	pairNext
)

// appendPair appends one slot to b. When b is full it grows by an eighth, not
// by doubling, to keep the slack of a long log small, and takes the whole of
// the allocator's size class it lands in.
func appendPair(b []byte, gap, count int64) []byte {
	if len(b)+2*binary.MaxVarintLen64 > cap(b) {
		// Appending to a nil slice gives the size class's whole capacity.
		nb := append([]byte(nil), make([]byte, len(b)+len(b)/8+2*binary.MaxVarintLen64)...)
		b = nb[:copy(nb, b)]
	}
	switch {
	case count == 1:
		return binary.AppendUvarint(b, uint64(gap)<<2) // pairOne is 0
	case gap == 1 && count-2 < 1<<62: // count-2 keeps its bits shifted by 2
		return binary.AppendUvarint(b, uint64(count-2)<<2|pairNext)
	}
	b = binary.AppendUvarint(b, uint64(gap)<<2|pairTail)
	return binary.AppendUvarint(b, uint64(count-1))
}

// readPair decodes the pair at the start of b and returns its size.
func readPair(b []byte) (gap, count int64, size int) {
	v, size := binary.Uvarint(b)
	switch v & 3 {
	case pairOne:
		return int64(v >> 2), 1, size
	case pairNext:
		return 1, int64(v>>2) + 2, size
	}
	c, m := binary.Uvarint(b[size:])
	return int64(v >> 2), int64(c) + 1, size + m
}

// scan skips the pairs of slots before oldest, without changing anything,
// and returns the sum of the counts left, the offset of the first pair left
// and the slot before it.
func (s *SlotState) scan(oldest int64) (alive int64, off int, base int64) {
	x := &s.Pairs
	alive, off, base = s.Count, int(x.Head), s.Base
	for off < len(x.Buf) {
		gap, c, size := readPair(x.Buf[off:])
		if base+gap >= oldest {
			break
		}
		base += gap
		alive -= c
		off += size
	}
	return alive, off, base
}

// trim drops the pairs scan skipped, compacting the buffer once more than
// half of it is dead.
func (s *SlotState) trim(alive int64, off int, base int64) {
	x := &s.Pairs
	s.Count, s.Base = alive, base
	switch {
	case off >= len(x.Buf):
		x.Buf, x.Head, x.Last = x.Buf[:0], 0, 0
	case off > len(x.Buf)/2:
		n := copy(x.Buf, x.Buf[off:])
		x.Buf = x.Buf[:n]
		x.Last -= int32(off)
		x.Head = 0
	default:
		x.Head = int32(off)
	}
}

// add counts n hits in slot cur. A slot older than the newest (a clock that
// stepped back) counts into the newest, so that the hits count for longer,
// never for less.
func (s *SlotState) add(cur, n int64) {
	x := &s.Pairs
	switch {
	case int(x.Head) >= len(x.Buf):
		x.Buf = appendPair(x.Buf[:0], 0, n)
		x.Head, x.Last = 0, 0
		s.Count, s.Base, s.Newest = n, cur, cur
	case cur <= s.Newest:
		gap, c, _ := readPair(x.Buf[x.Last:])
		x.Buf = appendPair(x.Buf[:x.Last], gap, c+n)
		s.Count += n
	default:
		x.Last = int32(len(x.Buf))
		x.Buf = appendPair(x.Buf, cur-s.Newest, n)
		s.Count += n
		s.Newest = cur
	}
}

// retry returns the least wait from now after which n more hits fit under
// limit: the death of the pair whose end leaves few enough counted.
func (s *SlotState) retry(g grid, alive, limit, n int64, off int, base, now int64) time.Duration {
	b := s.Pairs.Buf
	for off < len(b) {
		gap, c, size := readPair(b[off:])
		base += gap
		alive -= c
		off += size
		if alive <= limit-n {
			return time.Duration(g.death(base) - now)
		}
	}
	return Never // unreachable for n <= limit
}

// slotHit decides n hits against s by the counts of its slots in the last
// window of the grid of period (the sliding log's if log is true, else the
// sliding window's), at most limit; when peek is false and they are allowed it
// counts them in the slot of now. It reports whether it changed s: only
// allowed hits do.
func slotHit(s *SlotState, period, limit, n, now int64, peek, log bool) (Decision, bool) {
	g := slidingGrid(period)
	if log {
		g = logGrid(period)
	}
	cur := g.slot(now)
	alive, off, base := s.scan(cur - g.window)
	d := Decision{Count: alive, Remaining: max(0, limit-alive)}
	if alive > 0 {
		d.ResetAfter = time.Duration(g.death(s.Newest) - now)
	}
	switch {
	case n > limit:
		d.RetryAfter = Never
	case alive > limit-n:
		d.RetryAfter = s.retry(g, alive, limit, n, off, base, now)
	default:
		d.Allowed = true
	}
	if peek || !d.Allowed {
		return d, false
	}
	s.trim(alive, off, base)
	s.add(cur, n)
	death := g.death(s.Newest)
	d.Count = s.Count
	d.Remaining = max(0, limit-d.Count)
	d.ResetAfter = time.Duration(death - now)
	return d, true
}
