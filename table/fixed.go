package table

import (
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// Never is the RetryAfter of a hit that no wait can allow: [algo.Never].
const Never = algo.Never

// Decision is the outcome of one check of a limit: [algo.Decision].
type Decision = algo.Decision

// FixedWindow counts n hits for k at now (Unix nanoseconds) and decides them
// as the raterlimiter does: the window is bucket floor(now / k.Scale),
// every hit is counted, denied ones too, and the hits are allowed iff the
// window's count after them is at most limit. The count saturates at the
// largest int64: hits beyond it are denied, whatever the limit.
func (t *Table) FixedWindow(k Key, limit, n, now int64) Decision {
	e, saturated, inserted := t.add(k, FloorDiv(now, k.Scale), n, FloorDiv(now, int64(time.Millisecond)))
	d := Decision{Count: e.Count, Allowed: !saturated && e.Count <= limit}
	d.Remaining = max(0, limit-e.Count)
	d.ResetAfter = time.Duration(e.end() - now)
	if !inserted {
		record(e, d.Allowed)
	}
	switch {
	case d.Allowed:
	case n > limit:
		d.RetryAfter = Never
	default:
		d.RetryAfter = d.ResetAfter
	}
	return d
}

// PeekFixedWindow reports k's fixed window at now (Unix nanoseconds) as
// [Table.FixedWindow] would see it, and whether one more hit would be
// allowed, without changing anything. A key with nothing counted in the
// current window has ResetAfter 0: it is at full capacity.
func (t *Table) PeekFixedWindow(k Key, limit, now int64) Decision {
	var d Decision
	if e := t.lookup(k); e != nil && e.Bucket >= FloorDiv(now, k.Scale) {
		d.Count = e.Count
		d.ResetAfter = time.Duration(e.end() - now)
	}
	d.Allowed = d.Count < limit
	d.Remaining = max(0, limit-d.Count)
	switch {
	case d.Allowed:
	case limit < 1:
		d.RetryAfter = Never
	default:
		d.RetryAfter = d.ResetAfter
	}
	return d
}
