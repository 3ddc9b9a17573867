package table

import (
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
	i := t.lookup(k)
	if i == 0 {
		var s algo.FixedState
		*d = algo.FixedWindowHit(&s, k.Scale, limit, n, now)
		t.at(t.insert(k, s.Window)).FixedState = s
		return
	}
	e := t.at(i)
	// The hit works on the node's own state; a new window files it anew,
	// under the window it was filed under.
	w := e.Window
	*d = algo.FixedWindowHit(&e.FixedState, k.Scale, limit, n, now)
	record(e, d.Allowed)
	if e.Window != w {
		nw := e.Window
		e.Window = w
		t.move(i, nw)
	}
}

// PeekFixedWindow reports k's fixed window at now (Unix nanoseconds) as
// [Table.FixedWindow] would see it, and whether one more hit would be
// allowed, without changing anything. A key with nothing counted in the
// current window has ResetAfter 0: it is at full capacity.
func (t *Table) PeekFixedWindow(k Key, limit, now int64) algo.Decision {
	var s algo.FixedState
	if i := t.lookup(k); i != 0 {
		s = t.at(i).FixedState
	}
	return algo.FixedWindowPeek(s, k.Scale, limit, now)
}
