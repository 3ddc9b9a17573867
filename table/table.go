package table

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/google/btree"

	"github.com/actorlimit/actorlimit/algo"
)

// degree is the B-tree's degree: nodes hold up to 2*degree-1 entries. 32 keeps
// nodes a few cache lines wide and the tree shallow at millions of entries.
const degree = 32

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

// node is an [Entry] as the table holds it: the same fields, those a hit on
// a live entry reads and writes first, so that they share a cache line, and
// 16 bytes more, the links of the eviction ring (see evict.go). chances, the
// ring's count of passes the entry survives, lives in what would be Kind's
// padding. A node is 80 bytes, an Entry 64.
//
// Its first four words are an [algo.FixedState], so that a fixed window's
// hit works on the node itself: Window is the bucket the node is filed
// under in its run's tree, for every algorithm (for the others, the bucket
// of the state's death), and Count, Created and Modified hold the scalars
// of the other algorithms' states (see gcra.go and sliding.go).
type node struct {
	algo.FixedState
	Kind    uint8
	chances uint8
	Scale   int64
	ID      string
	prev    *node
	next    *node
}

// entry returns a copy of n as an Entry.
func (n *node) entry() Entry {
	return Entry{
		Key:    Key{Kind: n.Kind, Scale: n.Scale, ID: n.ID},
		Bucket: n.Window, Count: n.Count, Created: n.Created, Modified: n.Modified,
	}
}

// group is one window length of one kind: one contiguous run of the order.
type group struct {
	kind  uint8
	scale int64
}

// run is one group's part of the table: its run of the order, a B-tree of
// its entries by (bucket, id), and its index, its entries by id. Hashing the
// id alone, with Go's string-keyed map, is cheaper than hashing a whole Key;
// and since a group's oldest entries are the first of its own tree, a sweep
// takes them from the tree's left edge, the cheapest place to delete from.
type run struct {
	group
	tree  *btree.BTreeG[*node]
	index map[string]*node
}

// Table is an ordered table of limit entries with a hash index for point
// lookups. The zero value is not usable; call [New]. A Table is not safe for
// concurrent use.
type Table struct {
	groups map[group]*run        // the runs of the order, one per window length
	last   *run                  // the run of the last lookup: calls come in runs
	n      int                   // entries
	ext    map[*node]*algo.Pairs // the slots of the windowed counters' entries
	limit  int
	hand   *node // the eviction ring's next candidate; nil if the ring is empty

	evictions uint64
}

// New returns an empty table that holds at most limit entries; limit <= 0
// means no bound.
func New(limit int) *Table {
	if limit < 0 {
		limit = 0
	}
	return &Table{
		groups: make(map[group]*run),
		limit:  limit,
	}
}

// less orders the entries of one run: by bucket, then id. Kind and scale
// are the run's own.
func less(a, b *node) bool {
	if a.Window != b.Window {
		return a.Window < b.Window
	}
	return a.ID < b.ID
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

// lookup returns k's entry, or nil.
func (t *Table) lookup(k Key) *node {
	r := t.runOf(k.Kind, k.Scale)
	if r == nil {
		return nil
	}
	return r.index[k.ID]
}

// Evictions returns how many entries the memory bound has evicted so far.
func (t *Table) Evictions() uint64 { return t.evictions }

// Limit returns the table's bound on entries; 0 means none.
func (t *Table) Limit() int { return t.limit }

// Get returns a copy of k's entry and whether there is one.
func (t *Table) Get(k Key) (Entry, bool) {
	e := t.lookup(k)
	if e == nil {
		return Entry{}, false
	}
	return e.entry(), true
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
	return e.entry()
}

// add is [Table.Add]; it also reports whether the count saturated (the hits
// counted in the window are more than an int64 holds) and whether the entry
// is new.
func (t *Table) add(k Key, bucket, n, now int64) (e *node, saturated, inserted bool) {
	if e = t.lookup(k); e != nil {
		if bucket > e.Window {
			t.move(e, bucket)
			e.Count, e.Created = 0, now
		}
		e.Count, saturated = algo.AddSat(e.Count, n)
		e.Modified = now
		e.chances = hitChances
		return e, saturated, false
	}
	e = t.insert(k, bucket)
	e.Count, e.Created, e.Modified = n, now, now
	return e, false, true
}

// insert adds an empty entry for k, which must have none, in window bucket,
// evicting an entry first if the table is full. The new entry has no chance
// against eviction yet: it earns one by its next hit.
func (t *Table) insert(k Key, bucket int64) *node {
	if t.limit > 0 && t.n >= t.limit {
		t.evict()
	}
	// Never retain the caller's buffer.
	e := &node{Kind: k.Kind, Scale: k.Scale, ID: strings.Clone(k.ID)}
	e.Window = bucket
	r := t.runOf(k.Kind, k.Scale)
	if r == nil {
		r = &run{
			group: group{k.Kind, k.Scale},
			tree:  btree.NewG(degree, less),
			index: make(map[string]*node),
		}
		t.groups[r.group] = r
		t.last = r
	}
	r.index[e.ID] = e
	t.n++
	r.tree.ReplaceOrInsert(e)
	if t.limit > 0 {
		t.link(e)
	}
	return e
}

// move puts e in window bucket, keeping the order: the entry is taken out
// of the tree and put back. It costs nothing when e is in bucket already.
func (t *Table) move(e *node, bucket int64) {
	if e.Window == bucket {
		return
	}
	r := t.runOf(e.Kind, e.Scale)
	r.tree.Delete(e)
	e.Window = bucket
	r.tree.ReplaceOrInsert(e)
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
	e := t.lookup(k)
	if e == nil {
		return false
	}
	t.remove(e)
	return true
}

// remove deletes e from the table.
func (t *Table) remove(e *node) {
	r := t.runOf(e.Kind, e.Scale)
	r.tree.Delete(e)
	t.unindex(r, e)
}

// unindex forgets e, already out of r's tree: it leaves the index, the
// eviction ring and the side map of extensions, each in O(1).
func (t *Table) unindex(r *run, e *node) {
	delete(r.index, e.ID)
	t.n--
	if e.next != nil {
		t.unlink(e)
	}
	if len(t.ext) > 0 {
		delete(t.ext, e)
	}
	if len(r.index) == 0 {
		delete(t.groups, r.group)
		t.last = nil
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
	for _, r := range t.groups {
		// Window b ended at or before `before` iff (b+1)*scale <= before,
		// that is iff b < floor(before/scale).
		cutoff := algo.FloorDiv(before, r.scale)
		for {
			e, ok := r.tree.Min()
			if !ok || e.Window >= cutoff {
				break
			}
			if removed == max {
				return removed, true
			}
			r.tree.DeleteMin()
			t.unindex(r, e)
			removed++
		}
	}
	return removed, false
}

// Ascend calls fn for every entry in order (kind, scale, bucket, id) until fn
// returns false. fn gets a copy and must not change the table.
func (t *Table) Ascend(fn func(Entry) bool) {
	t.ascend(func(e *node) bool { return fn(e.entry()) })
}

// ascend walks the runs in (kind, scale) order and each run's tree in
// order, until fn returns false.
func (t *Table) ascend(fn func(*node) bool) {
	for _, r := range t.sortedRuns() {
		more := true
		r.tree.Ascend(func(e *node) bool {
			more = fn(e)
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
