package table

import (
	"cmp"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/google/btree"

	"github.com/actorlimit/actorlimit/algo"
)

// degree is the B-tree's degree: nodes hold up to 2*degree-1 entries. The
// entries are 4-byte node numbers, so 64 keeps a node's entries 8 cache
// lines wide (as 32 pointers did) and the tree shallow at millions of
// entries. (bench/'s BenchmarkMemory, 1 000 000 fixed-window keys, with
// the 64-byte nodes of before: 79.4 bytes a key in all with 64, 81.9 with
// 32, 77.0 with 128.)
const degree = 64

// Key names one limit state: an id under one kind of limit and one window
// length.
type Key struct {
	// Kind separates kinds of state that share window lengths (one per
	// algorithm). The table gives it no meaning beyond the order.
	Kind uint8
	// Scale is the window length in nanoseconds; it must be positive. The
	// raterlimiter's scales are whole milliseconds.
	Scale int64
	// ID is the client's identifier.
	ID string
}

// Entry is one row of the table: <bucketNum, id> -> <count, created,
// modified>. For a fixed window (and for [Table.Add]) the fields mean what
// they say, as in the original; the other algorithms keep the words of
// their typed state in Count, Created and Modified, as the package doc
// says ("Algorithms and their entries").
type Entry struct {
	Key
	// Bucket is the window number the entry is filed under: for a fixed
	// window floor(Unix ns / Scale), which for a whole-millisecond Scale is
	// the original's floor(Unix ms / scale ms); for the other algorithms the
	// window of Scale in which the key's state is back to full capacity.
	Bucket int64
	// Count is the number of hits counted in the window (fixed window), the
	// hits kept (sliding window and log), or the bucket's Rate.
	Count int64
	// Created is when the entry entered this window, in Unix ms (fixed
	// window); the slot before the oldest kept (sliding window and log); or
	// the bucket's Frac.
	Created int64
	// Modified is the time of the last hit, in Unix ms (fixed window); the
	// newest slot (sliding window and log); or the bucket's Empty, Unix ns.
	Modified int64
}

// Start returns when the entry's window starts, in Unix nanoseconds.
func (e *Entry) Start() int64 { return e.Bucket * e.Scale }

// End returns when the entry's window ends, in Unix nanoseconds.
func (e *Entry) End() int64 { return (e.Bucket + 1) * e.Scale }

// group is one window length of one kind: one contiguous run of the order.
type group struct {
	kind  uint8
	scale int64
}

// run is one group's part of the table: its run of the order, a B-tree of
// its node numbers by (bucket, id). A group's oldest entries are the first
// of its own tree, so a sweep takes them from the tree's left edge, the
// cheapest place to delete from.
type run struct {
	group
	num  uint32 // its number in t.runs, which its nodes hold
	n    int    // entries
	tree *btree.BTreeG[uint32]

	// How its nodes pack their states (state.go): the codec, the units
	// of its ref per window, the windows whose ref does not overflow, and
	// for codecBucket the bits of Empty's offset and of Frac and Rate.
	codec      uint8
	msDiv      bool // codecFixed with a scale of no whole ms (see ref)
	off, rate  uint8
	per        int64
	minW, maxW int64
}

// Table is an ordered table of limit entries with a hash index for point
// lookups. The zero value is not usable; call [New]. A Table is not safe for
// concurrent use, except for [Table.Prefetch].
type Table struct {
	nodes    slab
	wides    wideSlab    // the states that do not fit in their nodes (state.go)
	long     []string    // the ids longer than idInline, by the number their node holds
	longFree []uint32    // the free places of long
	dir      []*subIndex // the index's directory (index.go); nil until the first entry
	depth    uint8       // len(dir) == 1<<depth
	hashes   []uint64    // a split's scratch (index.go)

	groups   map[group]*run // the runs of the order, one per window length
	runs     []*run         // the runs by number; runs[0] and the free numbers are nil
	freeRuns []uint32
	last     *run // the run of the last lookup: calls come in runs

	n     int                    // entries
	ext   map[uint32]*algo.Pairs // the slots of the windowed counters' entries
	limit int
	hand  uint32 // the eviction ring's next candidate; 0 if the ring is empty

	// pivot is the bucket and id that node number 0 stands for in a
	// tree's order: the place a walk resumes from.
	pivot struct {
		window int64
		id     string
	}

	evictions uint64
	sink      uint32 // see touch

	// What Prefetch reads, between pads, on a cache line of its own that
	// the owner writes only when the directory or the runs change: callers
	// reading it take no line that the owner writes at each check.
	_        [64]byte
	seed     maphash.Seed
	seen     atomic.Pointer[seenIndex] // the directory, for Prefetch (prefetch.go)
	seenRuns atomic.Pointer[[]seenRun] // the runs' numbers, for Prefetch
	_        [64]byte
}

// New returns an empty table that holds at most limit entries; limit <= 0
// means no bound.
func New(limit int) *Table {
	if limit < 0 {
		limit = 0
	}
	t := &Table{
		groups: make(map[group]*run),
		runs:   []*run{nil},
		seed:   maphash.MakeSeed(),
		limit:  limit,
	}
	t.seen.Store(&noIndex)
	return t
}

// at returns node i.
func (t *Table) at(i uint32) *node { return t.nodes.at(i) }

// less orders the entries of one run: by bucket, then id. Kind and scale
// are the run's own. Node number 0 stands for t.pivot.
func (t *Table) less(a, b uint32) bool {
	wa, ia := t.treeKey(a)
	wb, ib := t.treeKey(b)
	if wa != wb {
		return wa < wb
	}
	return ia < ib
}

// treeKey returns what node i is ordered by in its run's tree.
func (t *Table) treeKey(i uint32) (int64, string) {
	if i == 0 {
		return t.pivot.window, t.pivot.id
	}
	e := t.at(i)
	return e.Window, t.idOf(e)
}

// entry returns node e as an Entry with the ID id (e's id, or a string of
// the same bytes).
func (t *Table) entry(e *node, id string) Entry {
	r := t.runs[e.run]
	count, created, modified := t.words(e, r)
	return Entry{
		Key:    Key{Kind: r.kind, Scale: r.scale, ID: id},
		Bucket: e.Window, Count: count, Created: created, Modified: modified,
	}
}

// Len returns the number of entries.
func (t *Table) Len() int { return t.n }

// runOf returns the run of the group (kind, scale), or nil if it has no
// entry.
func (t *Table) runOf(kind uint8, scale int64) *run {
	if r := t.last; r != nil && r.kind == kind && r.scale == scale {
		return r
	}
	r := t.groups[group{kind, scale}]
	if r != nil {
		t.last = r
	}
	return r
}

// lookup returns the number of k's node, or 0.
func (t *Table) lookup(k Key) uint32 {
	_, i := t.find2(k)
	return i
}

// find2 returns k's run, or nil, and the number of k's node, or 0.
func (t *Table) find2(k Key) (*run, uint32) {
	r := t.runOf(k.Kind, k.Scale)
	if r == nil {
		return nil, 0
	}
	return r, t.find(r.num, k.ID, t.hash(r.num, k.ID))
}

// Evictions returns how many entries the memory bound has evicted so far.
func (t *Table) Evictions() uint64 { return t.evictions }

// Limit returns the table's bound on entries; 0 means none.
func (t *Table) Limit() int { return t.limit }

// Get returns a copy of k's entry and whether there is one.
func (t *Table) Get(k Key) (Entry, bool) {
	i := t.lookup(k)
	if i == 0 {
		return Entry{}, false
	}
	return t.entry(t.at(i), k.ID), true
}

// Add is the table's ets:update_counter: it adds n hits to k's entry for
// window bucket, inserting the entry if there is none, sets its modified time
// to now (Unix ms) and returns the entry as it is after the change. It is
// one index lookup when the entry exists in that window.
//
// If the entry belongs to an earlier window it is moved to bucket and starts
// again from zero, its created time set to now. A bucket earlier than the
// entry's (a clock that stepped back) counts into the entry's own, newer
// window, so a step back never forgets hits. The count saturates: it stays
// at the largest int64 (or the smallest) rather than wrap. Add allocates
// nothing when the entry exists in that window; moving it to a new window is
// a tree delete and insert, which may now and then allocate a node. A hit on
// an existing entry gives it a chance against eviction (see the package
// doc).
func (t *Table) Add(k Key, bucket, n, now int64) Entry {
	e, _, _ := t.add(k, bucket, n, now)
	return t.entry(e, k.ID)
}

// add is [Table.Add]; it also reports whether the count saturated (the hits
// counted in the window are more than an int64 holds) and whether the entry
// is new.
func (t *Table) add(k Key, bucket, n, now int64) (e *node, saturated, inserted bool) {
	if i := t.lookup(k); i != 0 {
		e = t.at(i)
		r := t.runs[e.run]
		count, created, _ := t.words(e, r)
		if bucket > e.Window {
			t.move(i, bucket)
			count, created = 0, now
		}
		count, saturated = algo.AddSat(count, n)
		t.setWords(e, r, count, created, now)
		e.setChances(hitChances)
		return e, saturated, false
	}
	e = t.at(t.insert(k, bucket))
	t.setWords(e, t.runs[e.run], n, now, now)
	return e, false, true
}

// insert adds an empty entry for k, which must have none, in window bucket,
// evicting an entry first if the table is full, and returns its node. The
// new entry has no chance against eviction yet: it earns one by its next
// hit.
func (t *Table) insert(k Key, bucket int64) uint32 {
	if t.limit > 0 && t.n >= t.limit {
		t.evict()
	}
	r := t.runOf(k.Kind, k.Scale)
	if r == nil {
		r = t.newRun(group{k.Kind, k.Scale})
	}
	i := t.nodes.alloc()
	e := t.at(i)
	e.run = r.num
	e.Window = bucket
	t.setID(e, k.ID)
	t.place(i, t.hash(r.num, k.ID))
	t.n++
	r.n++
	r.tree.ReplaceOrInsert(i)
	if t.limit > 0 {
		t.link(i)
	}
	return i
}

// newRun adds the empty run of g.
func (t *Table) newRun(g group) *run {
	r := &run{group: g, tree: btree.NewG(degree, t.less)}
	r.setCodec()
	if n := len(t.freeRuns); n > 0 {
		r.num = t.freeRuns[n-1]
		t.freeRuns = t.freeRuns[:n-1]
		t.runs[r.num] = r
	} else {
		r.num = uint32(len(t.runs))
		t.runs = append(t.runs, r)
	}
	t.groups[g] = r
	t.last = r
	t.seeRuns()
	return r
}

// move puts node i in window bucket, keeping the order: the entry is taken
// out of the tree and put back. It costs nothing when i is in bucket
// already.
func (t *Table) move(i uint32, bucket int64) {
	e := t.at(i)
	if e.Window == bucket {
		return
	}
	r := t.runs[e.run]
	r.tree.Delete(i)
	e.Window = bucket
	r.tree.ReplaceOrInsert(i)
}

// deathBucket returns the bucket, in units of scale, of an entry whose state
// is back to empty at the Unix ns time death: the last bucket that ends at or
// after death, so that [Table.Expire] deletes the entry only once its state
// is dead.
func deathBucket(death, scale int64) int64 {
	return algo.FloorDiv(death-1, scale)
}

// Delete removes k's entry and reports whether there was one.
func (t *Table) Delete(k Key) bool {
	i := t.lookup(k)
	if i == 0 {
		return false
	}
	t.remove(i)
	return true
}

// remove deletes node i from the table.
func (t *Table) remove(i uint32) {
	r := t.runs[t.at(i).run]
	r.tree.Delete(i)
	t.unindex(r, i)
}

// unindex forgets node i, already out of r's tree: it leaves the index,
// the eviction ring and the side map of extensions, and goes back to the
// slab, each in O(1).
func (t *Table) unindex(r *run, i uint32) {
	e := t.at(i)
	t.unplace(i, t.hash(r.num, t.idOf(e)))
	t.n--
	r.n--
	if e.next() != 0 {
		t.unlink(i)
	}
	if len(t.ext) > 0 {
		delete(t.ext, i)
	}
	t.dropWide(e)
	t.dropID(e)
	t.nodes.release(i)
	if r.n == 0 {
		delete(t.groups, r.group)
		t.runs[r.num] = nil
		t.freeRuns = append(t.freeRuns, r.num)
		t.last = nil
		t.seeRuns()
	}
}

// Expire deletes entries whose window ended at or before the Unix ns time
// before, at most max of them (max <= 0 means no bound). It returns how many
// it deleted and whether more such entries may remain. For each window length
// it walks the order from the oldest bucket and stops at the first live one,
// so its cost grows with what it deletes, not with what stays. For the
// algorithms other than the fixed window an entry's bucket is the one in
// which its state is back to full capacity (see the package doc), so Expire
// deletes only entries with nothing left to remember.
func (t *Table) Expire(before int64, max int) (removed int, more bool) {
	if max <= 0 {
		max = math.MaxInt
	}
	for _, r := range t.runs {
		if r == nil {
			continue
		}
		// Window b ended at or before `before` iff (b+1)*scale <= before,
		// that is iff b < floor(before/scale).
		cutoff := algo.FloorDiv(before, r.scale)
		for r.n > 0 {
			i, _ := r.tree.Min()
			if t.at(i).Window >= cutoff {
				break
			}
			if removed == max {
				return removed, true
			}
			r.tree.DeleteMin()
			t.unindex(r, i)
			removed++
		}
	}
	return removed, false
}

// Ascend calls fn for every entry in order (kind, scale, bucket, id) until fn
// returns false. fn gets a copy and must not change the table.
func (t *Table) Ascend(fn func(Entry) bool) {
	t.ascend(func(i uint32) bool {
		e := t.at(i)
		return fn(t.entry(e, strings.Clone(t.idOf(e))))
	})
}

// ascend walks the runs in (kind, scale) order and each run's tree in
// order, until fn returns false.
func (t *Table) ascend(fn func(i uint32) bool) {
	for _, r := range t.sortedRuns() {
		more := true
		r.tree.Ascend(func(i uint32) bool {
			more = fn(i)
			return more
		})
		if !more {
			return
		}
	}
}

// sortedRuns returns the runs in (kind, scale) order.
func (t *Table) sortedRuns() []*run {
	runs := make([]*run, 0, len(t.groups))
	for _, r := range t.groups {
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b *run) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.scale, b.scale))
	})
	return runs
}
