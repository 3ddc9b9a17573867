package table

import "hash/maphash"

// The index finds a key's node: open addressing with linear probing, over
// slots of 32 bits that hold a node number and, in its top bits, a tag of
// the key's hash, so that a probe loads a node only when the tags agree
// (15 times in 16 a slot of another key is passed without touching its
// node). The hash is maphash's, under a seed of the table's own, of the id
// and the run: keys an attacker chooses do not collide more than others,
// and a probe that meets a node compares its id's bytes, so colliding keys
// are still apart. The index is cut into subIndexes parts by the hash's
// top bits, each with its own slots: a part doubles when three quarters
// full, so the rehash a growth costs is a small part's, never the whole
// table's at once. A deletion shifts back the slots that follow it, so no
// tombstone lengthens later probes.

const (
	// nodeBits is the width of a node number in a slot; the slot's other
	// bits are the tag.
	nodeBits = 28
	nodeMask = 1<<nodeBits - 1
	subBits  = 8
	// subIndexes is the number of parts of the index.
	subIndexes = 1 << subBits
	// minSlots is the size of a part's first slots.
	minSlots = 8
)

// subIndex is one part of the index.
type subIndex struct {
	slots []uint32 // 0: empty; else tag<<nodeBits | node number
	n     int      // slots in use
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
func tag(h uint64) uint32 { return uint32(h>>(64-subBits-(32-nodeBits))) << nodeBits }

// sub returns the part of the index that h falls in.
func (t *Table) sub(h uint64) *subIndex {
	if t.subs == nil {
		t.subs = new([subIndexes]subIndex)
	}
	return &t.subs[h>>(64-subBits)]
}

// find returns the node of the key (run, id), whose hash is h, or 0.
func (t *Table) find(run uint32, id string, h uint64) uint32 {
	if t.subs == nil {
		return 0
	}
	s := &t.subs[h>>(64-subBits)]
	if s.slots == nil {
		return 0
	}
	mask := uint64(len(s.slots) - 1)
	want := tag(h)
	for p := h & mask; ; p = (p + 1) & mask {
		v := s.slots[p]
		if v == 0 {
			return 0
		}
		if v&^nodeMask != want {
			continue
		}
		i := v & nodeMask
		if e := t.nodes.at(i); e.run == run && t.idOf(e) == id {
			return i
		}
	}
}

// place puts node i, whose key hashes to h, in the index.
func (t *Table) place(i uint32, h uint64) {
	s := t.sub(h)
	if (s.n+1)*4 > len(s.slots)*3 {
		t.grow(s)
	}
	s.n++
	put(s.slots, i|tag(h), h)
}

// put puts slot value v, of hash h, in the first empty slot from its home.
func put(slots []uint32, v uint32, h uint64) {
	mask := uint64(len(slots) - 1)
	p := h & mask
	for slots[p] != 0 {
		p = (p + 1) & mask
	}
	slots[p] = v
}

// grow doubles s's slots.
func (t *Table) grow(s *subIndex) {
	old := s.slots
	s.slots = make([]uint32, max(minSlots, 2*len(old)))
	for _, v := range old {
		if v != 0 {
			put(s.slots, v, t.nodeHash(v&nodeMask))
		}
	}
}

// unplace takes node i, whose key hashes to h, out of the index; it must
// be there. The slots after it in its cluster shift back into the hole
// when that brings them no further from their home.
func (t *Table) unplace(i uint32, h uint64) {
	s := &t.subs[h>>(64-subBits)]
	mask := uint64(len(s.slots) - 1)
	p := h & mask
	for s.slots[p]&nodeMask != i {
		p = (p + 1) & mask
	}
	s.n--
	for q := p; ; {
		s.slots[p] = 0
		for {
			q = (q + 1) & mask
			v := s.slots[q]
			if v == 0 {
				return
			}
			// v may fill the hole at p if p lies between its home and q.
			if home := t.nodeHash(v&nodeMask) & mask; (q-home)&mask >= (q-p)&mask {
				s.slots[p] = v
				p = q
				break
			}
		}
	}
}
