package table

// The memory bound's eviction, a second-chance CLOCK over every entry of a
// bounded table (the package doc, "Memory bound", says what it guarantees).
// The ring is a circular doubly-linked list through the nodes' prev and next
// links, so that Delete and Expire take a node off it in O(1); t.hand is the
// next candidate, and new nodes go in just before it, where the hand reaches
// them last. A node's chances is how many more passes of the hand it
// survives. Tables with no bound keep no ring: their nodes' links stay nil.

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
		e.chances = hitChances
	} else {
		e.chances = denyChances
	}
}

// link puts e into the ring just behind the hand, where the hand reaches it
// last.
func (t *Table) link(e *node) {
	h := t.hand
	if h == nil {
		e.prev, e.next = e, e
		t.hand = e
		return
	}
	e.prev, e.next = h.prev, h
	h.prev.next = e
	h.prev = e
}

// unlink takes e out of the ring, moving the hand on if it points at e.
func (t *Table) unlink(e *node) {
	if e.next == e {
		t.hand = nil
	} else {
		if t.hand == e {
			t.hand = e.next
		}
		e.prev.next = e.next
		e.next.prev = e.prev
	}
	e.prev, e.next = nil, nil
}

// evict deletes one entry, the first the hand finds with no chance left,
// taking one chance from each entry it passes on the way, and counts it.
// It stops: every entry it passes loses a chance, and none has more than
// denyChances.
func (t *Table) evict() {
	for e := t.hand; e != nil; e = t.hand {
		t.hand = e.next
		if e.chances > 0 {
			e.chances--
			continue
		}
		t.remove(e)
		t.evictions++
		return
	}
}
