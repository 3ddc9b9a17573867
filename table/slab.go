package table

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// The nodes live in a slab: fixed chunks of chunkSize nodes that never
// move, so a node is named by a 32-bit number (its place in the slab) and
// holds no pointer at all: the garbage collector never scans the slab, and
// the ring, the trees and the index hold node numbers. Number 0 names no
// node (chunk 0's first slot stays unused), so the zero value of a link
// means "none". A deleted node goes on a free list, through its next link,
// and the next insert takes it: the slab does not shrink, as a Go map does
// not, but a flood of deleted keys leaks nothing.
//
// An id of up to idInline bytes (every IPv4 address, most user names) is
// held in the node itself, so that a hit compares it in the node it reads
// the state from; a longer one is a string in t.long, found by the number
// the node holds in place of the bytes, and its slot of t.long goes on a
// free list when the node is deleted.

const (
	chunkBits = 10
	chunkSize = 1 << chunkBits
	// idInline is the longest id a node holds in itself.
	idInline = 16
	// longID is a node's idLen when its id lives in t.long.
	longID = 31
	// maxNodes bounds the node numbers: the index keeps a hash tag in the
	// top bits of each slot (see index.go), and a node's links are
	// nodeBits wide.
	maxNodes = 1 << nodeBits
)

// node is an [Entry] as the table holds it, in 48 bytes: Window, the bucket
// it is filed under in its run's tree (for a fixed window the window, for
// the other algorithms the bucket of the state's death); its state packed
// in w (see state.go: the three words of the algorithm's state, as 32-bit
// numbers relative to Window, or, when they do not fit, the number of a
// wide state that holds them whole); its run (kind and scale); the links
// of the eviction ring and a few small fields packed in link; and its id.
type node struct {
	Window int64
	w      [3]uint32
	run    uint32 // its run's number in t.runs; 0 for a free node
	// link holds prev (bits 0-27) and next (28-55), node numbers of the
	// eviction ring (next is also the free list; see evict.go), then the
	// chances against eviction (56-57), whether the state is wide (58),
	// and the id's length (59-63): at most idInline, or longID.
	link uint64
	id   [idInline]byte
}

// The fields packed in a node's link.
const (
	linkMask     = 1<<nodeBits - 1
	nextShift    = nodeBits
	chancesShift = 2 * nodeBits
	chancesMask  = 3
	wideBit      = 1 << (chancesShift + 2)
	idLenShift   = chancesShift + 3
)

func (e *node) prev() uint32 { return uint32(e.link & linkMask) }

func (e *node) next() uint32 { return uint32(e.link >> nextShift & linkMask) }

func (e *node) setPrev(i uint32) { e.link = e.link&^linkMask | uint64(i) }

func (e *node) setNext(i uint32) { e.link = e.link&^(linkMask<<nextShift) | uint64(i)<<nextShift }

func (e *node) chances() uint8 { return uint8(e.link >> chancesShift & chancesMask) }

func (e *node) setChances(c uint8) {
	e.link = e.link&^(chancesMask<<chancesShift) | uint64(c)<<chancesShift
}

func (e *node) wide() bool { return e.link&wideBit != 0 }

func (e *node) idLen() uint8 { return uint8(e.link >> idLenShift) }

func (e *node) setIDLen(n uint8) {
	e.link = e.link&^(0x1F<<idLenShift) | uint64(n)<<idLenShift
}

// slab holds the nodes of a table.
type slab struct {
	chunks []*[chunkSize]node
	free   uint32 // the first free node, 0 if none
	top    uint32 // the next node number never used
}

// at returns node i, which must have been allocated.
func (s *slab) at(i uint32) *node {
	return &s.chunks[i>>chunkBits][i&(chunkSize-1)]
}

// alloc returns the number of a free node, zeroed.
func (s *slab) alloc() uint32 {
	if i := s.free; i != 0 {
		e := s.at(i)
		s.free = e.next()
		*e = node{}
		return i
	}
	if s.top == 0 {
		s.top = 1 // number 0 is no node
	}
	i := s.top
	if i >= maxNodes {
		panic(fmt.Sprintf("table: more than %d entries", maxNodes-1))
	}
	if int(i>>chunkBits) == len(s.chunks) {
		s.chunks = append(s.chunks, new([chunkSize]node))
	}
	s.top++
	return i
}

// release puts node i on the free list.
func (s *slab) release(i uint32) {
	e := s.at(i)
	*e = node{}
	e.setNext(s.free)
	s.free = i
}

// idOf returns e's id. For an id held in the node the string shares the
// node's bytes: it is valid only until the node is released, and must
// never be kept (compare it, hash it, copy it).
func (t *Table) idOf(e *node) string {
	n := e.idLen()
	if n == longID {
		return t.long[binary.LittleEndian.Uint32(e.id[:4])]
	}
	if n == 0 {
		return ""
	}
	return unsafe.String(&e.id[0], int(n))
}

// setID gives e, a new node, the id id: a copy, so the table never retains
// the caller's buffer.
func (t *Table) setID(e *node, id string) {
	if len(id) <= idInline {
		e.setIDLen(uint8(copy(e.id[:], id)))
		return
	}
	var ref uint32
	if n := len(t.longFree); n > 0 {
		ref = t.longFree[n-1]
		t.longFree = t.longFree[:n-1]
		t.long[ref] = string([]byte(id))
	} else {
		ref = uint32(len(t.long))
		t.long = append(t.long, string([]byte(id)))
	}
	e.setIDLen(longID)
	binary.LittleEndian.PutUint32(e.id[:4], ref)
}

// dropID forgets e's id, if it is a long one, so its string can be freed.
func (t *Table) dropID(e *node) {
	if e.idLen() != longID {
		return
	}
	ref := binary.LittleEndian.Uint32(e.id[:4])
	t.long[ref] = ""
	t.longFree = append(t.longFree, ref)
}
