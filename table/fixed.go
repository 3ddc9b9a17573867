package table

import (
	"math"

	"github.com/actorlimit/actorlimit/algo"
)

// FixedWindow counts n hits for k at now (Unix nanoseconds) and decides them
// by [algo.FixedWindowHit], with k.Scale as the period: the window is bucket
// floor(now / k.Scale), every hit is counted, denied ones too, and the hits
// are allowed iff the window's count after them is at most limit. The
// entry's Bucket is the window, Count its hits, Created and Modified Unix
// ms ([algo.FixedState]).
func (t *Table) FixedWindow(k Key, limit, n, now int64) algo.Decision {
	var d algo.Decision
	t.fixedWindow(k, limit, n, now, &d)
	return d
}

// fixedWindow is [Table.FixedWindow], writing the decision to d.
func (t *Table) fixedWindow(k Key, limit, n, now int64, d *algo.Decision) {
	r, i := t.find2(k)
	if i == 0 {
		var s algo.FixedState
		*d = algo.FixedWindowHit(&s, k.Scale, limit, n, now)
		e := t.at(t.insert(k, s.Window))
		t.setWords(e, t.runs[e.run], s.Count, s.Created, s.Modified)
		return
	}
	e := t.at(i)
	if e.wide() || r.codec != codecFixed {
		t.fixedWide(i, r, k.Scale, limit, n, now, d)
		return
	}
	// The packed state of a fixed window, unpacked and packed here (the
	// usual hit, in the window the node is filed under, packs again
	// whatever the hits: its count saturates past 2^32 only).
	ref, _ := r.ref(e.Window) // a packed state has a ref
	s := algo.FixedState{
		Window: e.Window, Count: int64(e.w[0]),
		Created: ref + int64(e.w[1]) - fixedBias, Modified: ref + int64(e.w[2]) - fixedBias,
	}
	*d = algo.FixedWindowHit(&s, k.Scale, limit, n, now)
	record(e, d.Allowed)
	if s.Window != e.Window {
		t.move(i, s.Window)
		t.setWords(e, r, s.Count, s.Created, s.Modified)
		return
	}
	// base did not overflow (the state was packed under it). Each time is
	// the node's own, at least base, or now's Unix ms, within 2^54 of 0, so
	// its difference from base, even wrapped, is a uint64 of at most
	// MaxUint32 only when it truly lies in [0, 2^32); a negative count is
	// a uint64 above that too. What does not fit goes to setWords, which
	// keeps it wide.
	base := ref - fixedBias
	c, m := uint64(s.Created-base), uint64(s.Modified-base)
	if c|m|uint64(s.Count) > math.MaxUint32 {
		t.setWords(e, r, s.Count, s.Created, s.Modified)
		return
	}
	e.w = [3]uint32{uint32(s.Count), uint32(c), uint32(m)}
}

// fixedWide is fixedWindow's hit on node i of run r whose state is wide, or
// packed by another codec than the fixed window's.
func (t *Table) fixedWide(i uint32, r *run, scale, limit, n, now int64, d *algo.Decision) {
	e := t.at(i)
	s := t.fixedOf(e, r)
	*d = algo.FixedWindowHit(&s, scale, limit, n, now)
	record(e, d.Allowed)
	if s.Window != e.Window {
		t.move(i, s.Window)
	}
	t.setWords(e, r, s.Count, s.Created, s.Modified)
}

// fixedOf returns node e's state as a fixed window; r is its run.
func (t *Table) fixedOf(e *node, r *run) algo.FixedState {
	count, created, modified := t.words(e, r)
	return algo.FixedState{Window: e.Window, Count: count, Created: created, Modified: modified}
}

// PeekFixedWindow reports k's fixed window at now (Unix nanoseconds) as
// [Table.FixedWindow] would see it, and whether one more hit would be
// allowed, without changing anything. A key with nothing counted in the
// current window has ResetAfter 0: it is at full capacity.
func (t *Table) PeekFixedWindow(k Key, limit, now int64) algo.Decision {
	var s algo.FixedState
	if r, i := t.find2(k); i != 0 {
		s = t.fixedOf(t.at(i), r)
	}
	return algo.FixedWindowPeek(s, k.Scale, limit, now)
}
