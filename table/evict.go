package table

// The memory bound's eviction, a second-chance CLOCK over every entry of a
// bounded table (the package doc, "Memory bound", says what it guarantees).
// The ring is a circular doubly-linked list through the nodes' prev and next
// links (node numbers, packed in their link words), so that Delete and Expire take a node off it in O(1); t.hand is the
// next candidate, and new nodes go in just before it, where the hand reaches
// them last. A node's chances is how many more passes of the hand it
// survives. Tables with no bound keep no ring: their nodes' links stay 0.

// Chances against eviction that a hit gives its entry.
const (
	// hitChances is what an allowed hit gives: the hand must pass the
	// entry once more, with no hit in between, before it evicts it.
	hitChances = 1
	// denyChances is what a denied hit gives: a denying key's state
	// survives that many turns of the hand without a hit.
	denyChances = 3
)

// record gives e, an entry that existed before the hit, the chances the
// hit's decision earns it.
func record(e *node, allowed bool) {
	if allowed {
		e.setChances(hitChances)
	} else {
		e.setChances(denyChances)
	}
}

// link puts node i into the ring just behind the hand, where the hand
// reaches it last.
func (t *Table) link(i uint32) {
	e := t.at(i)
	h := t.hand
	if h == 0 {
		e.setPrev(i)
		e.setNext(i)
		t.hand = i
		return
	}
	he := t.at(h)
	p := he.prev()
	e.setPrev(p)
	e.setNext(h)
	t.at(p).setNext(i)
	he.setPrev(i)
}

// unlink takes node i out of the ring, moving the hand on if it points at
// i.
func (t *Table) unlink(i uint32) {
	e := t.at(i)
	p, n := e.prev(), e.next()
	if n == i {
		t.hand = 0
	} else {
		if t.hand == i {
			t.hand = n
		}
		t.at(p).setNext(n)
		t.at(n).setPrev(p)
	}
	e.setPrev(0)
	e.setNext(0)
}

// evict deletes one entry, the first the hand finds with no chance left,
// taking one chance from each entry it passes on the way, and counts it.
// It stops: every entry it passes loses a chance, and none has more than
// denyChances.
func (t *Table) evict() {
	for i := t.hand; i != 0; i = t.hand {
		e := t.at(i)
		t.hand = e.next()
		if c := e.chances(); c > 0 {
			e.setChances(c - 1)
			continue
		}
		t.remove(i)
		t.evictions++
		return
	}
}
