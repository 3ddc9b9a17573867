package table

import (
	"sync/atomic"
	"unsafe"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/internal/prefetch"
)

// Once the index no longer fits in a core's caches (from some tens of
// thousands of keys), the read of a key's slot is a miss: the slots are
// hashed, so a check's slot lies far from the last one's, whatever the
// order of the keys. [Table.Prefetch] lets a caller name that slot to the
// CPU before it waits for its turn at the table, so that the read from
// memory overlaps with the caller's clock read and wait instead of
// stalling the lookup, inside the turn, while every other caller waits.
//
// Prefetch runs beside the table's owner, so it reads only what the table
// publishes for it with atomic stores: the directory's parts (seenIndex,
// republished whole when the directory doubles, a part at a time when one
// splits), each part's slots (subIndex.view, republished when it grows)
// and the runs' numbers (seenRuns). It reads no slot: a prefetch is no
// access to memory, so the owner writes the slots as before.

// prefetchDepth is the directory depth from which Prefetch does anything:
// 16 parts or more, some 30 000 keys and more, about 200 KiB of slots and
// 1.5 MiB of nodes. Below it the index is in the cache, and the hash that
// Prefetch would compute is all it would add.
const prefetchDepth = 4

// maxSeenRuns bounds the runs that Prefetch looks a check's run up among:
// a table of more windows (kinds and lengths) prefetches for its first
// maxSeenRuns only.
const maxSeenRuns = 16

// seenIndex is the index's directory as Prefetch sees it.
type seenIndex struct {
	depth uint8
	parts []atomic.Pointer[subIndex]
}

// noIndex is what Prefetch sees of a table with no index yet.
var noIndex seenIndex

// seenRun names a run for Prefetch.
type seenRun struct {
	group
	num uint32
}

// Prefetch asks the CPU to start loading the index slot at which the
// lookup of c's key will begin, so that the check that follows does not
// wait for it. It is the one method of a Table that is safe for concurrent
// use with all the others: it changes nothing, and it may name a slot that
// the owner has moved since, or none; the check looks its key up as always,
// so only its speed depends on Prefetch. It does nothing while the index
// is small enough to stay in a core's caches.
func (t *Table) Prefetch(c *algo.Check) {
	if v := t.seen.Load(); v.depth >= prefetchDepth {
		t.prefetch(v, c)
	}
}

// prefetch is Prefetch past its first test, which stays inlined in the
// caller: a small table costs one load and a comparison.
func (t *Table) prefetch(v *seenIndex, c *algo.Check) {
	if p := t.seenSlot(v, c); p != nil {
		prefetch.Line(unsafe.Pointer(p))
	}
}

// seenSlot returns the slot Prefetch names for c in v, the published
// directory, or nil. It is safe for concurrent use, as Prefetch is, and the
// slot it returns may be read only by the table's owner.
func (t *Table) seenSlot(v *seenIndex, c *algo.Check) *uint32 {
	rs := t.seenRuns.Load()
	if rs == nil {
		return nil
	}
	kind, scale := uint8(c.Algorithm), int64(c.Period)
	for _, r := range *rs {
		if r.kind == kind && r.scale == scale {
			h := t.hash(r.num, c.ID)
			slots := *v.parts[h>>(64-v.depth)].Load().view.Load()
			return &slots[home(h, len(slots))]
		}
	}
	return nil
}

// publish makes s's slots, as they are now, those Prefetch sees.
func (s *subIndex) publish() {
	slots := s.slots
	s.view.Store(&slots)
}

// seeDirectory publishes the directory, whose parts are published, to
// Prefetch: after it is made and each time it doubles.
func (t *Table) seeDirectory() {
	v := &seenIndex{depth: t.depth, parts: make([]atomic.Pointer[subIndex], len(t.dir))}
	for j, s := range t.dir {
		v.parts[j].Store(s)
	}
	t.seen.Store(v)
}

// seePart publishes directory entries start to start+n-1 of t.dir, which
// a split has changed, to Prefetch.
func (t *Table) seePart(start, n int) {
	v := t.seen.Load()
	for j := start; j < start+n; j++ {
		v.parts[j].Store(t.dir[j])
	}
}

// seeRuns publishes the runs' numbers to Prefetch, at most maxSeenRuns of
// them: after a run is made or deleted.
func (t *Table) seeRuns() {
	rs := make([]seenRun, 0, min(maxSeenRuns, len(t.groups)))
	for _, r := range t.runs {
		if r != nil && len(rs) < maxSeenRuns {
			rs = append(rs, seenRun{r.group, r.num})
		}
	}
	t.seenRuns.Store(&rs)
}

// touch reads the index slot and the node of each check's key, so that
// their reads from memory, independent of one another, overlap instead of
// waiting one after the other; the checks then find them in the cache. It
// changes nothing but t.sink, which keeps the reads from being optimised
// away.
func (t *Table) touch(checks []algo.Check) {
	if t.dir == nil {
		return
	}
	var sum uint32
	for i := range checks {
		c := &checks[i]
		r := t.runOf(uint8(c.Algorithm), int64(c.Period))
		if r == nil {
			continue
		}
		h := t.hash(r.num, c.ID)
		s := t.sub(h)
		if v := s.slots[home(h, len(s.slots))]; v != 0 {
			sum += uint32(t.at(v & nodeMask).Window)
		}
	}
	t.sink += sum
}
