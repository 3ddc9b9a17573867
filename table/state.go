package table

import (
	"math"
	"math/bits"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// A node's state is three words, the Count, Created and Modified of its
// [Entry] (for the bucket algorithms Rate, Frac and Empty, for the sliding
// ones Count, Base and Newest). Their values lie close to the start of the
// node's Window, so a node holds them in 12 bytes, as numbers relative to
// Window, each run with the packing of its kind (its codec):
//
//   - codecFixed (the fixed window, and the kinds of no algorithm that
//     [Table.Add] makes): Count as it is, Created and Modified in ms from
//     the window's first millisecond, plus fixedBias, each in 32 bits: a
//     window of up to 37 days, and a clock up to 12 days behind it.
//   - codecBucket: Empty in ns from the bucket's start, in as many bits as
//     the run's scale takes (a state is filed under the bucket of its
//     death, at most one scale after its start), then Frac and Rate in
//     what is left of the 96 bits, half each, at most 32: 26 bits (a
//     Limit of up to 67 million) for a scale of an hour, 24 for a day.
//   - codecSlots: Count as it is, Base and Newest in slots from Window's
//     first slot, plus slotsBias, each in 32 bits.
//
// A state that does not fit (a count past 2^32, a clock stepped far back,
// a window longer than the packing allows, values [Table.Add] was given) is
// kept whole in a wide state of three int64 words, in a slab of its own,
// whose number the node holds in w[0]; nothing is ever rounded. A node goes
// back to the packed form when its state fits again.

// The codecs.
const (
	codecFixed = iota
	codecBucket
	codecSlots
)

const (
	// fixedBias is added to a fixed window's times, relative to the
	// window's start, so that a time before it (a clock that stepped back)
	// fits too.
	fixedBias = 1 << 30
	// slotsBias is added to the sliding algorithms' slots, relative to
	// Window's first slot: Newest lies just before it, Base further back.
	slotsBias = 1 << 31
	// packedBits is the room of a node's packed state.
	packedBits = 96
)

// setCodec gives r the packing of its kind's state (see above) and the
// range of windows in which it applies.
func (r *run) setCodec() {
	r.per = r.scale
	switch algo.Algorithm(r.kind) {
	case algo.GCRA, algo.TokenBucket, algo.LeakyBucket:
		r.codec = codecBucket
		r.off = uint8(bits.Len64(uint64(r.scale)))
		r.rate = min(32, (packedBits-r.off)/2)
	case algo.SlidingWindow:
		r.codec, r.per = codecSlots, algo.SubWindows
	case algo.SlidingLog:
		r.codec, r.per = codecSlots, r.scale/int64(time.Millisecond)
	default:
		r.codec = codecFixed
		if r.scale%int64(time.Millisecond) == 0 {
			// A whole number of ms: a window's first ms is w*per, no
			// division.
			r.per, r.msDiv = r.scale/int64(time.Millisecond), false
		} else {
			r.msDiv = true
		}
	}
	if r.per > 0 {
		r.minW, r.maxW = math.MinInt64/r.per, math.MaxInt64/r.per
	} else {
		r.minW, r.maxW = 1, 0 // no window: every state is wide
	}
}

// ref returns the first unit of window w in r's codec (a millisecond, a
// nanosecond, a slot), or false if w*per overflows: w*per, and for a fixed
// window whose scale is not whole milliseconds floor(w*scale / 1 ms).
func (r *run) ref(w int64) (int64, bool) {
	if w < r.minW || w > r.maxW {
		return 0, false
	}
	p := w * r.per
	if r.msDiv {
		q := p / int64(time.Millisecond)
		if q*int64(time.Millisecond) > p {
			q--
		}
		return q, true
	}
	return p, true
}

// words returns e's state as three words (Count, Created, Modified); r is
// e's run.
func (t *Table) words(e *node, r *run) (a, b, c int64) {
	if e.wide() {
		v := t.wides.at(e.w[0])
		return v[0], v[1], v[2]
	}
	ref, _ := r.ref(e.Window) // a packed state has a ref
	switch r.codec {
	case codecFixed:
		return int64(e.w[0]), ref + int64(e.w[1]) - fixedBias, ref + int64(e.w[2]) - fixedBias
	case codecSlots:
		return int64(e.w[0]), ref + int64(e.w[1]) - slotsBias, ref + int64(e.w[2]) - slotsBias
	}
	return r.unpackBucket(e.w, ref)
}

// setWords sets e's state to the three words (Count, Created, Modified),
// packed if they fit, else in a wide state; r is e's run, and e.Window
// must be the window the state is filed under.
func (t *Table) setWords(e *node, r *run, a, b, c int64) {
	if w, ok := r.pack(e.Window, a, b, c); ok {
		if e.wide() {
			t.wides.release(e.w[0])
			e.link &^= wideBit
		}
		e.w = w
		return
	}
	if !e.wide() {
		e.w = [3]uint32{t.wides.alloc()}
		e.link |= wideBit
	}
	*t.wides.at(e.w[0]) = [3]int64{a, b, c}
}

// dropWide frees e's wide state, if it has one.
func (t *Table) dropWide(e *node) {
	if e.wide() {
		t.wides.release(e.w[0])
		e.link &^= wideBit
	}
}

// pack returns the packed form of the state (a, b, c) of a node of r in
// window w, or false if it does not fit.
func (r *run) pack(w int64, a, b, c int64) ([3]uint32, bool) {
	ref, ok := r.ref(w)
	if !ok {
		return [3]uint32{}, false
	}
	switch r.codec {
	case codecFixed:
		x, okb := rel32(b, ref, fixedBias)
		y, okc := rel32(c, ref, fixedBias)
		return [3]uint32{uint32(a), x, y}, okb && okc && uint64(a) <= math.MaxUint32
	case codecSlots:
		x, okb := rel32(b, ref, slotsBias)
		y, okc := rel32(c, ref, slotsBias)
		return [3]uint32{uint32(a), x, y}, okb && okc && uint64(a) <= math.MaxUint32
	}
	return r.packBucket(ref, a, b, c)
}

// unpackBucket returns the Rate, Frac and Empty of a bucket's state packed
// in w under ref: Empty's offset from ref in the low r.off bits of the 96,
// then v = Frac + Rate<<r.rate, Frac and Rate in r.rate bits each (at
// most 32, so that v is a uint64). Every shift is by 1 to 63 (r.off is
// 1 to 63), which the &63 tells the compiler.
func (r *run) unpackBucket(w [3]uint32, ref int64) (rate, frac, empty int64) {
	x, y := uint64(w[0])|uint64(w[1])<<32, uint64(w[2])
	off, rb := uint(r.off)&63, uint(r.rate)&63
	v := x>>off | y<<((64-off)&63)
	return int64(v >> rb), int64(v & (1<<rb - 1)), ref + int64(x&(1<<off-1))
}

// packBucket is unpackBucket's inverse, false if the state does not fit:
// Rate or Frac past r.rate bits, Empty before ref or r.off bits after it.
func (r *run) packBucket(ref int64, rate, frac, empty int64) ([3]uint32, bool) {
	if empty < ref {
		return [3]uint32{}, false
	}
	d := uint64(empty) - uint64(ref) // exact: empty >= ref
	off, rb := uint(r.off)&63, uint(r.rate)&63
	if d>>off != 0 || uint64(rate)>>rb != 0 || uint64(frac)>>rb != 0 {
		return [3]uint32{}, false
	}
	v := uint64(frac) | uint64(rate)<<rb
	x, y := d|v<<off, v>>((64-off)&63)
	return [3]uint32{uint32(x), uint32(x >> 32), uint32(y)}, true
}

// rel32 returns v - ref + bias and whether it lies in [0, 2^32).
func rel32(v, ref, bias int64) (uint32, bool) {
	if ref < math.MinInt64+bias {
		return 0, false
	}
	base := ref - bias
	if v < base {
		return 0, false
	}
	d := uint64(v) - uint64(base) // exact: v >= base
	return uint32(d), d <= math.MaxUint32
}

// wideChunkBits sets the size of a chunk of wide states, which are rare:
// 64 of them, 1.5 KiB.
const wideChunkBits = 6

// wideSlab holds the wide states: chunks that never move, named by 32-bit
// numbers as the nodes are, 0 naming none, freed ones on a free list
// through their first word.
type wideSlab struct {
	chunks []*[1 << wideChunkBits][3]int64
	free   uint32
	top    uint32
}

// at returns wide state i, which must have been allocated.
func (s *wideSlab) at(i uint32) *[3]int64 {
	return &s.chunks[i>>wideChunkBits][i&(1<<wideChunkBits-1)]
}

// alloc returns the number of a free wide state, zeroed.
func (s *wideSlab) alloc() uint32 {
	if i := s.free; i != 0 {
		v := s.at(i)
		s.free = uint32(v[0])
		*v = [3]int64{}
		return i
	}
	if s.top == 0 {
		s.top = 1
	}
	i := s.top
	if int(i>>wideChunkBits) == len(s.chunks) {
		s.chunks = append(s.chunks, new([1 << wideChunkBits][3]int64))
	}
	s.top++
	return i
}

// release puts wide state i on the free list.
func (s *wideSlab) release(i uint32) {
	*s.at(i) = [3]int64{int64(s.free)}
	s.free = i
}
