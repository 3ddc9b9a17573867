package table

import (
	"encoding/binary"
	"math/bits"
	"time"
)

// SubWindows is how many sub-windows a sliding window's Period is cut into.
const SubWindows = 60

// SlidingWindow decides n hits for k at now (Unix ns) by the sliding-window
// counter of Figma's rate limiter, in its strict variant: the Period
// (k.Scale, a whole number of milliseconds) is cut into [SubWindows]
// sub-windows, a count is kept per sub-window, and the hits are allowed iff
// the counts of the current sub-window and of the SubWindows before it (the
// last Period and one sub-window), plus n, are at most limit. Every hit less
// than a Period old is in those counts, so no interval of length Period ever
// holds more than limit allowed hits; the price is that a hit is still
// counted up to one sub-window after it is a Period old. That is 61 counts
// on a sub-window's edge too, where Figma sums 60: with nanosecond times,
// the sub-window that began exactly a Period ago may hold hits less than a
// Period old. Denied hits change nothing.
func (t *Table) SlidingWindow(k Key, limit, n, now int64) Decision {
	return t.countHit(k, slidingGrid(k.Scale), limit, n, now, false)
}

// PeekSlidingWindow reports k's state at now as [Table.SlidingWindow] sees
// it, and whether one more hit would be allowed, without changing anything.
func (t *Table) PeekSlidingWindow(k Key, limit, now int64) Decision {
	return t.countHit(k, slidingGrid(k.Scale), limit, 1, now, true)
}

func slidingGrid(period int64) grid {
	return grid{num: SubWindows, den: period, window: SubWindows}
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

// ext is the variable-size state of a sliding window or log: its non-empty
// slots, oldest first, each as the gap from the slot before it and its
// count, packed by appendPair. The entry's Count is the sum of the counts
// from head on, Created the slot before the pair at head (the first pair's
// own slot, with a gap of 0), and Modified the newest slot.
type ext struct {
	buf  []byte
	head int32 // offset of the oldest pair still kept
	last int32 // offset of the newest pair
}

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
func (x *ext) scan(e *node, oldest int64) (alive int64, off int, base int64) {
	alive, off, base = e.Count, int(x.head), e.Created
	for off < len(x.buf) {
		gap, c, size := readPair(x.buf[off:])
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
func (x *ext) trim(e *node, alive int64, off int, base int64) {
	e.Count, e.Created = alive, base
	switch {
	case off >= len(x.buf):
		x.buf, x.head, x.last = x.buf[:0], 0, 0
	case off > len(x.buf)/2:
		n := copy(x.buf, x.buf[off:])
		x.buf = x.buf[:n]
		x.last -= int32(off)
		x.head = 0
	default:
		x.head = int32(off)
	}
}

// add counts n hits in slot cur. A slot older than the newest (a clock that
// stepped back) counts into the newest, so that the hits count for longer,
// never for less.
func (x *ext) add(e *node, cur, n int64) {
	switch {
	case int(x.head) >= len(x.buf):
		x.buf = appendPair(x.buf[:0], 0, n)
		x.head, x.last = 0, 0
		e.Count, e.Created, e.Modified = n, cur, cur
	case cur <= e.Modified:
		gap, c, _ := readPair(x.buf[x.last:])
		x.buf = appendPair(x.buf[:x.last], gap, c+n)
		e.Count += n
	default:
		x.last = int32(len(x.buf))
		x.buf = appendPair(x.buf, cur-e.Modified, n)
		e.Count += n
		e.Modified = cur
	}
}

// retry returns the least wait from now after which n more hits fit under
// limit: the death of the pair whose end leaves few enough counted.
func (x *ext) retry(g grid, alive, limit, n int64, off int, base, now int64) time.Duration {
	for off < len(x.buf) {
		gap, c, size := readPair(x.buf[off:])
		base += gap
		alive -= c
		off += size
		if alive <= limit-n {
			return time.Duration(g.death(base) - now)
		}
	}
	return Never // unreachable for n <= limit
}

// countHit decides n hits for k by the counts of its slots in the last
// window of g, at most limit; when peek is false and they are allowed it
// counts them in the slot of now.
func (t *Table) countHit(k Key, g grid, limit, n, now int64, peek bool) Decision {
	cur := g.slot(now)
	e := t.lookup(k)
	var x *ext
	if e != nil {
		x = t.ext[e]
	}
	var (
		alive, base int64
		off         int
	)
	if x != nil {
		alive, off, base = x.scan(e, cur-g.window)
	}
	d := Decision{Count: alive, Remaining: max(0, limit-alive)}
	if alive > 0 {
		d.ResetAfter = time.Duration(g.death(e.Modified) - now)
	}
	switch {
	case n > limit:
		d.RetryAfter = Never
	case alive > limit-n:
		d.RetryAfter = x.retry(g, alive, limit, n, off, base, now)
	default:
		d.Allowed = true
	}
	if peek || !d.Allowed {
		if !peek && e != nil {
			record(e, false)
		}
		return d
	}
	if e == nil {
		e = t.insert(k, deathBucket(g.death(cur), k.Scale))
	} else {
		record(e, true)
	}
	if x == nil {
		x = new(ext)
		if t.ext == nil {
			t.ext = make(map[*node]*ext)
		}
		t.ext[e] = x
	} else {
		x.trim(e, alive, off, base)
	}
	x.add(e, cur, n)
	death := g.death(e.Modified)
	t.move(e, deathBucket(death, k.Scale))
	d.Count = e.Count
	d.Remaining = max(0, limit-d.Count)
	d.ResetAfter = time.Duration(death - now)
	return d
}
