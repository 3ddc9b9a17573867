package table

import (
	"hash/maphash"
	"sync/atomic"
)

// The index finds a key's node: open addressing with linear probing, over
// slots of 32 bits that hold a node number and, in its top bits, a tag of
// the key's hash, so that a probe loads a node only when the tags agree
// (15 times in 16 a slot of another key is passed without touching its
// node). The hash is maphash's, under a seed of the table's own, of the id
// and the run: keys an attacker chooses do not collide more than others,
// and a probe that meets a node compares its id's bytes, so colliding keys
// are still apart. A deletion shifts back the slots that follow it, so no
// tombstone lengthens later probes.
//
// The slots are cut into parts by extendible hashing: a directory of
// 1<<t.depth entries, indexed by the hash's top bits, points at the parts,
// each of which holds the keys whose hashes share its own top s.depth bits.
// A key's home in its part is its hash's low 32 bits scaled to the part's
// size (a multiply and a shift, so a part can have any size, not only a
// power of two). A part grows by a quarter when three quarters full, up to
// maxSlots slots; past that it splits in two by its next bit (doubling the
// directory when the part already used all of its bits), each half sized
// to be two thirds full. So a part is 60 to 75% full once past its first
// few keys (about 6 bytes a key), a small table costs a few slots, and no
// insert rehashes more than one part: maxSlots*3/4 keys, never the whole
// table at once.

const (
	// nodeBits is the width of a node number in a slot; the slot's other
	// bits are the tag.
	nodeBits = 28
	nodeMask = 1<<nodeBits - 1
	// minSlots and maxSlots bound the size of a part.
	minSlots = 8
	maxSlots = 4096
	// tagShift is where in the hash a slot's tag comes from: above the
	// bits that place a key in its part, below those that choose the part.
	tagShift = 32
)

// subIndex is one part of the index.
type subIndex struct {
	slots []uint32                 // 0: empty; else tag<<nodeBits | node number
	n     int                      // slots in use
	depth uint8                    // the top bits of the hash that its keys share
	view  atomic.Pointer[[]uint32] // slots, for Prefetch (prefetch.go)
}

// hash returns the hash of the key (run, id).
func (t *Table) hash(run uint32, id string) uint64 {
	return maphash.String(t.seed, id) ^ uint64(run)*0x9e3779b97f4a7c15
}

// nodeHash returns the hash of node i's key.
func (t *Table) nodeHash(i uint32) uint64 {
	e := t.nodes.at(i)
	return t.hash(e.run, t.idOf(e))
}

// tag is the part of a slot that h gives it besides the node number.
func tag(h uint64) uint32 { return uint32(h>>tagShift) << nodeBits }

// sub returns the part of the index that h falls in; the index must have
// one.
func (t *Table) sub(h uint64) *subIndex { return t.dir[h>>(64-t.depth)] }

// home returns the slot of a part of n slots where a probe for the hash h
// starts.
func home(h uint64, n int) int { return int(uint64(uint32(h)) * uint64(n) >> 32) }

// find returns the node of the key (run, id), whose hash is h, or 0.
func (t *Table) find(run uint32, id string, h uint64) uint32 {
	if t.dir == nil {
		return 0
	}
	slots := t.sub(h).slots
	want := tag(h)
	for p := home(h, len(slots)); ; {
		v := slots[p]
		if v == 0 {
			return 0
		}
		if v&^nodeMask == want {
			i := v & nodeMask
			if e := t.nodes.at(i); e.run == run && t.idOf(e) == id {
				return i
			}
		}
		if p++; p == len(slots) {
			p = 0
		}
	}
}

// place puts node i, whose key hashes to h, in the index.
func (t *Table) place(i uint32, h uint64) {
	if t.dir == nil {
		s := &subIndex{slots: make([]uint32, minSlots)}
		s.publish()
		t.dir = []*subIndex{s}
		t.seeDirectory()
	}
	s := t.sub(h)
	for (s.n+1)*4 > len(s.slots)*3 {
		if len(s.slots) < maxSlots {
			t.grow(s)
			break
		}
		t.split(s, h)
		s = t.sub(h)
	}
	s.n++
	put(s.slots, i|tag(h), h)
}

// put puts slot value v, of hash h, in the first empty slot from its home.
func put(slots []uint32, v uint32, h uint64) {
	p := home(h, len(slots))
	for slots[p] != 0 {
		if p++; p == len(slots) {
			p = 0
		}
	}
	slots[p] = v
}

// sizeFor returns the slots of a part that holds n keys two thirds full,
// a multiple of 8, at least minSlots.
func sizeFor(n int) int { return max(minSlots, (n*3/2+8)&^7) }

// grow makes s's slots a quarter more, at most maxSlots.
func (t *Table) grow(s *subIndex) {
	old := s.slots
	s.slots = make([]uint32, min(maxSlots, (len(old)*5/4+7)&^7))
	for _, v := range old {
		if v != 0 {
			put(s.slots, v, t.nodeHash(v&nodeMask))
		}
	}
	s.publish()
}

// split replaces s, the part of hash h, by two parts of one more bit.
func (t *Table) split(s *subIndex, h uint64) {
	if s.depth == t.depth {
		dir := make([]*subIndex, 2*len(t.dir))
		for j, p := range t.dir {
			dir[2*j], dir[2*j+1] = p, p
		}
		t.dir, t.depth = dir, t.depth+1
		t.seeDirectory()
	}
	d := s.depth + 1
	// The keys' hashes, computed once: t.hashes is kept for the next split.
	t.hashes = t.hashes[:0]
	var counts [2]int
	for _, v := range s.slots {
		if v != 0 {
			vh := t.nodeHash(v & nodeMask)
			t.hashes = append(t.hashes, vh)
			counts[vh>>(64-d)&1]++
		}
	}
	halves := [2]*subIndex{
		{slots: make([]uint32, sizeFor(counts[0])), n: counts[0], depth: d},
		{slots: make([]uint32, sizeFor(counts[1])), n: counts[1], depth: d},
	}
	j := 0
	for _, v := range s.slots {
		if v != 0 {
			vh := t.hashes[j]
			j++
			put(halves[vh>>(64-d)&1].slots, v, vh)
		}
	}
	// s had the directory entries of its prefix, a run of span entries:
	// the first half go to the keys whose next bit is 0.
	span := 1 << (t.depth - s.depth)
	start := int(h>>(64-s.depth)) * span
	halves[0].publish()
	halves[1].publish()
	for j := range span {
		t.dir[start+j] = halves[j/(span/2)]
	}
	t.seePart(start, span)
}

// unplace takes node i, whose key hashes to h, out of the index; it must
// be there. The slots after it in its cluster shift back into the hole
// when that brings them no further from their home.
func (t *Table) unplace(i uint32, h uint64) {
	s := t.sub(h)
	n := len(s.slots)
	// dist is how far slot b lies after slot a, going round.
	dist := func(a, b int) int {
		if b < a {
			return b + n - a
		}
		return b - a
	}
	p := home(h, n)
	for s.slots[p]&nodeMask != i {
		if p++; p == n {
			p = 0
		}
	}
	s.n--
	for q := p; ; {
		s.slots[p] = 0
		for {
			if q++; q == n {
				q = 0
			}
			v := s.slots[q]
			if v == 0 {
				return
			}
			// v may fill the hole at p if p lies between its home and q.
			if hv := home(t.nodeHash(v&nodeMask), n); dist(hv, q) >= dist(p, q) {
				s.slots[p] = v
				p = q
				break
			}
		}
	}
}
