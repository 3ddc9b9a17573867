package table

import "github.com/actorlimit/actorlimit/algo"

// SubWindows is how many sub-windows a sliding window's Period is cut into:
// [algo.SubWindows].
const SubWindows = algo.SubWindows

// SlidingWindow decides n hits for k at now (Unix ns) by
// [algo.SlidingWindowHit], the sliding-window counter of Figma's rate
// limiter in its strict variant, with k.Scale (a whole number of
// milliseconds) as the Period: a count per Period/[SubWindows], and never
// more than limit allowed hits in any interval of length Period. Denied hits
// change nothing.
func (t *Table) SlidingWindow(k Key, limit, n, now int64) algo.Decision {
	var d algo.Decision
	t.slidingWindow(k, limit, n, now, &d)
	return d
}

// slidingWindow is [Table.SlidingWindow], writing the decision to d.
func (t *Table) slidingWindow(k Key, limit, n, now int64, d *algo.Decision) {
	t.slotsHit(algo.SlidingWindowHit, k, limit, n, now, d)
}

// PeekSlidingWindow reports k's state at now as [Table.SlidingWindow] sees
// it, and whether one more hit would be allowed, without changing anything.
func (t *Table) PeekSlidingWindow(k Key, limit, now int64) algo.Decision {
	return t.slotsPeek(algo.SlidingWindowPeek, k, limit, now)
}

// slotsHit applies hit, the pure function of an algorithm whose state is an
// [algo.SlotState] (the sliding window and the sliding log), to k's entry,
// writing the decision to d: it records the decision's eviction chances and
// files the entry anew when hit changed its state.
func (t *Table) slotsHit(hit func(s *algo.SlotState, period, limit, n, now int64) (algo.Decision, bool),
	k Key, limit, n, now int64, d *algo.Decision) {
	var s algo.SlotState
	i, x := t.slotsOf(k, &s)
	var changed bool
	*d, changed = hit(&s, k.Scale, limit, n, now)
	if i != 0 {
		record(t.at(i), d.Allowed)
	}
	if changed {
		t.putSlots(k, i, x, &s, now+int64(d.ResetAfter))
	}
}

// slotsPeek is [Table.slotsHit]'s read-only twin: peek sees a copy of k's
// state.
func (t *Table) slotsPeek(peek func(s algo.SlotState, period, limit, now int64) algo.Decision, k Key, limit, now int64) algo.Decision {
	var s algo.SlotState
	t.slotsOf(k, &s)
	return peek(s, k.Scale, limit, now)
}

// Entry fields of the windowed counters ([algo.SlotState]): Count holds the
// hits kept, Created the slot before the oldest pair kept (Base), Modified
// the newest slot (Newest); the pairs hang off the entry in the side map
// t.ext, which holds only the entries that have some.

// slotsOf returns k's node, or 0, and its pairs, or nil, and sets s to
// its state as slots (s is left as it is, the empty state, if k has none).
func (t *Table) slotsOf(k Key, s *algo.SlotState) (uint32, *algo.Pairs) {
	r, i := t.find2(k)
	if i == 0 {
		return 0, nil
	}
	x := t.ext[i]
	if x != nil {
		count, base, newest := t.words(t.at(i), r)
		*s = algo.SlotState{Count: count, Base: base, Newest: newest, Pairs: *x}
	}
	return i, x
}

// putSlots stores s, the changed state of k, in node i and its pairs x
// (creating either if 0 or nil), and files it under the bucket of death, s's death: the
// time of the hit plus the decision's ResetAfter, which is the wait until
// the key is back to full capacity.
func (t *Table) putSlots(k Key, i uint32, x *algo.Pairs, s *algo.SlotState, death int64) {
	b := deathBucket(death, k.Scale)
	if i == 0 {
		i = t.insert(k, b)
	}
	if x == nil {
		x = new(algo.Pairs)
		if t.ext == nil {
			t.ext = make(map[uint32]*algo.Pairs)
		}
		t.ext[i] = x
	}
	*x = s.Pairs
	t.move(i, b)
	e := t.at(i)
	t.setWords(e, t.runs[e.run], s.Count, s.Base, s.Newest)
}
