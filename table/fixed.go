package table

import (
	"github.com/actorlimit/actorlimit/algo"
)

// Never is the RetryAfter of a hit that no wait can allow: [algo.Never].
const Never = algo.Never

// Decision is the outcome of one check of a limit: [algo.Decision].
type Decision = algo.Decision

// FixedWindow counts n hits for k at now (Unix nanoseconds) and decides them
// by [algo.FixedWindowHit], with k.Scale as the period: the window is bucket
// floor(now / k.Scale), every hit is counted, denied ones too, and the hits
// are allowed iff the window's count after them is at most limit. The
// entry's Bucket is the window, Count its hits, Created and Modified Unix
// ms ([algo.FixedState]).
func (t *Table) FixedWindow(k Key, limit, n, now int64) Decision {
	e := t.lookup(k)
	var s algo.FixedState
	if e != nil {
		s = algo.FixedState{Window: e.Bucket, Count: e.Count, Created: e.Created, Modified: e.Modified}
	}
	d := algo.FixedWindowHit(&s, k.Scale, limit, n, now)
	if e == nil {
		e = t.insert(k, s.Window)
	} else {
		record(e, d.Allowed)
		if e.Bucket != s.Window {
			t.move(e, s.Window)
		}
	}
	e.Count, e.Created, e.Modified = s.Count, s.Created, s.Modified
	return d
}

// PeekFixedWindow reports k's fixed window at now (Unix nanoseconds) as
// [Table.FixedWindow] would see it, and whether one more hit would be
// allowed, without changing anything. A key with nothing counted in the
// current window has ResetAfter 0: it is at full capacity.
func (t *Table) PeekFixedWindow(k Key, limit, now int64) Decision {
	var s algo.FixedState
	if e := t.lookup(k); e != nil {
		s = algo.FixedState{Window: e.Bucket, Count: e.Count, Created: e.Created, Modified: e.Modified}
	}
	return algo.FixedWindowPeek(s, k.Scale, limit, now)
}
