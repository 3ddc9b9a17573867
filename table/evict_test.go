package table

import (
	"fmt"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/actorlimit/actorlimit/algo"
)

// clockModel is the reference for the eviction ring, written the obvious
// way: the keys in ring order in a slice, the hand an index into it.
type clockModel struct {
	ring    []Key
	hand    int
	chances map[Key]int
}

func newClockModel() *clockModel { return &clockModel{chances: map[Key]int{}} }

// insert puts k just behind the hand, with no chance.
func (c *clockModel) insert(k Key) {
	c.ring = slices.Insert(c.ring, c.hand, k)
	c.hand = (c.hand + 1) % len(c.ring)
	c.chances[k] = 0
}

func (c *clockModel) hit(k Key) { c.chances[k] = hitChances }

// remove takes k out of the ring, if it is there; the hand then points at
// the key that followed k.
func (c *clockModel) remove(k Key) {
	i := slices.Index(c.ring, k)
	if i < 0 {
		return
	}
	c.ring = slices.Delete(c.ring, i, i+1)
	delete(c.chances, k)
	if i < c.hand {
		c.hand--
	}
	if c.hand >= len(c.ring) {
		c.hand = 0
	}
}

// keep removes every key that m does not hold.
func (c *clockModel) keep(m model) {
	for _, k := range slices.Clone(c.ring) {
		if _, ok := m[k]; !ok {
			c.remove(k)
		}
	}
}

// evict removes and returns the key a full table must evict.
func (c *clockModel) evict() Key {
	for {
		k := c.ring[c.hand]
		if c.chances[k] == 0 {
			c.remove(k)
			return k
		}
		c.chances[k]--
		c.hand = (c.hand + 1) % len(c.ring)
	}
}

// checkRing fails unless the eviction ring of a bounded table holds each of
// its entries exactly once, with consistent links and chances in range.
func checkRing(t *testing.T, tb *Table) {
	t.Helper()
	if tb.hand == 0 {
		if tb.Len() != 0 {
			t.Fatalf("no ring, %d entries", tb.Len())
		}
		return
	}
	seen := 0
	for i := tb.hand; ; {
		e := tb.at(i)
		entry := tb.entry(e, tb.idOf(e))
		if tb.at(e.next()).prev() != i || tb.at(e.prev()).next() != i {
			t.Fatalf("ring links broken at %+v", entry)
		}
		if tb.lookup(entry.Key) != i {
			t.Fatalf("ring holds %+v, which the table does not", entry)
		}
		if e.chances() > denyChances {
			t.Fatalf("%+v has %d chances", entry, e.chances())
		}
		if seen++; seen > tb.Len() {
			t.Fatalf("ring longer than the %d entries", tb.Len())
		}
		if i = e.next(); i == tb.hand {
			break
		}
	}
	if seen != tb.Len() {
		t.Fatalf("ring holds %d entries, the table %d", seen, tb.Len())
	}
}

// fixedAlgo is the fixed window as a tableAlgo, for the tests that run every
// algorithm of the table.
var fixedAlgo = tableAlgo{
	name: "FixedWindow", alg: algo.FixedWindow, window: true,
	hit:  func(t *Table, k Key, l, _, n, now int64) algo.Decision { return t.FixedWindow(k, l, n, now) },
	peek: func(t *Table, k Key, l, _, now int64) algo.Decision { return t.PeekFixedWindow(k, l, now) },
}

// allAlgos is every algorithm of the table.
var allAlgos = append([]tableAlgo{fixedAlgo}, algos...)

// burstFor returns the burst that gives a the capacity c: the leaky bucket
// holds one more hit than its burst.
func burstFor(a tableAlgo, c int64) int64 {
	if a.name == "LeakyBucket" {
		return c - 1
	}
	return c
}

const hour = int64(time.Hour)

// floodID is the i-th id of a flood: "k000000", "k000001", ...
func floodID(i int) string { return fmt.Sprintf("k%06d", i) }

// TestFloodKeepsActiveLimits floods a bounded table with fresh ids, four
// between two hits of an active id limited to 100 per hour: whatever the
// algorithm, wherever the active id sorts among the flood's ids, and
// whether the flood shares its window length or not, the active id is
// allowed its 100 hits and no more, and the table never holds more than its
// bound.
func TestFloodKeepsActiveLimits(t *testing.T) {
	const size, limit, hits, flood = 1_000, 100, 5_000, 4
	floods := []struct {
		name string
		a    func(active tableAlgo) tableAlgo
		key  func(i int) Key
	}{
		{"same", func(a tableAlgo) tableAlgo { return a }, func(i int) Key { return Key{Kind: 1, Scale: hour, ID: floodID(i)} }},
		{"fixed-1s", func(tableAlgo) tableAlgo { return fixedAlgo }, func(i int) Key { return Key{Kind: 0, Scale: sec, ID: floodID(i)} }},
	}
	for _, a := range allAlgos {
		for _, id := range []string{"a-active", "k002500x", "z-active"} {
			for _, f := range floods {
				t.Run(fmt.Sprintf("alg=%s/id=%s/flood=%s", a.name, id, f.name), func(t *testing.T) {
					tbl, k := New(size), Key{Kind: 1, Scale: hour, ID: id}
					now, allowed, fresh := int64(1_800_000_000)*sec, int64(0), 0
					fa := f.a(a)
					for i := range hits {
						for range flood {
							fa.hit(tbl, f.key(fresh), limit, burstFor(fa, limit), 1, now)
							fresh++
						}
						if a.hit(tbl, k, limit, burstFor(a, limit), 1, now).Allowed {
							allowed++
						}
						if tbl.Len() > size {
							t.Fatalf("hit %d: %d entries, bound %d", i, tbl.Len(), size)
						}
						now += int64(time.Microsecond)
					}
					if allowed != limit {
						t.Errorf("the active id was allowed %d of %d hits, want %d", allowed, hits, limit)
					}
					if want := uint64(fresh + 1 - size); tbl.Evictions() != want {
						t.Errorf("Evictions() = %d, want %d", tbl.Evictions(), want)
					}
					checkRing(t, tbl)
				})
			}
		}
	}
}

// TestFloodRareHits pins down "rarely": in a full table of idle entries,
// where each fresh id evicts one, an id whose last hit was allowed keeps its
// state if hit once every size fresh ids, and loses it if hit once every
// 2*size; one whose last hit was denied keeps it if hit once every 3*size,
// and loses it if hit once every 4*size.
func TestFloodRareHits(t *testing.T) {
	const size = 100
	tests := []struct {
		name  string
		limit int64 // the tracked id's: 1 to deny from its second hit on
		gap   int   // fresh ids between two hits
		kept  bool
	}{
		{"allowed, hit every size", 1 << 40, size, true},
		{"allowed, hit every 2*size", 1 << 40, 2 * size, false},
		{"denying, hit every 3*size", 1, 3 * size, true},
		{"denying, hit every 4*size", 1, 4 * size, false},
	}
	for _, a := range allAlgos {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("alg=%s/%s", a.name, tt.name), func(t *testing.T) {
				if a.name == "SlidingLog" && tt.limit > 1 {
					tt.limit = 10_000 // the log's memory grows with its limit
				}
				tbl, k := New(size), Key{Kind: 1, Scale: hour, ID: "a-tracked"}
				now := int64(1_800_000_000) * sec
				burst := burstFor(a, min(tt.limit, 1<<20))
				a.hit(tbl, k, tt.limit, burst, 1, now)
				first := a.hit(tbl, k, tt.limit, burst, 1, now)
				if first.Allowed != (tt.limit > 1) {
					t.Fatalf("second hit: %+v", first)
				}
				fresh, lost := 0, false
				for round := range 10 {
					for range tt.gap {
						a.hit(tbl, Key{Kind: 1, Scale: hour, ID: floodID(fresh)}, 1<<20, burstFor(a, 1<<20), 1, now)
						fresh++
						now += int64(time.Microsecond)
					}
					_, ok := tbl.Get(k)
					lost = lost || !ok
					d := a.hit(tbl, k, tt.limit, burst, 1, now)
					if ok && d.Allowed != (tt.limit > 1) {
						t.Fatalf("round %d: the kept state decided %+v", round, d)
					}
				}
				if lost == tt.kept {
					t.Fatalf("state lost: %v, want %v", lost, !tt.kept)
				}
			})
		}
	}
}

// TestEvictIdleFirst fills a bounded table, hits half its entries, and
// inserts as many fresh ones: exactly the idle half goes, wherever its ids
// and windows sort.
func TestEvictIdleFirst(t *testing.T) {
	const size = 100
	tb := New(size)
	var old, fresh []Key
	for i := range size {
		// Ids and windows in every order relative to the fresh ones'.
		old = append(old, key(uint8(i%2), []int64{sec, min1}[i%3%2], fmt.Sprintf("%c%03d", "amz"[i%3], i)))
		fresh = append(fresh, key(0, sec, fmt.Sprintf("k%03d", i)))
	}
	for i, k := range old {
		tb.Add(k, int64(i%7), 1, 0)
	}
	for i, k := range old {
		if i%2 == 0 {
			tb.Add(k, int64(i%7), 1, 0)
		}
	}
	for _, k := range fresh[:size/2] {
		tb.Add(k, 3, 1, 0)
	}
	for i, k := range old {
		if _, ok := tb.Get(k); ok != (i%2 == 0) {
			t.Fatalf("%+v, hit %v, held %v", k, i%2 == 0, ok)
		}
	}
	for _, k := range fresh[:size/2] {
		if _, ok := tb.Get(k); !ok {
			t.Fatalf("fresh %+v is gone", k)
		}
	}
	if tb.Len() != size || tb.Evictions() != size/2 {
		t.Fatalf("Len() = %d, Evictions() = %d, want %d and %d", tb.Len(), tb.Evictions(), size, size/2)
	}
	checkRing(t, tb)
}

// TestBoundedHitAllocs checks that a hit on an existing entry of a full,
// bounded table allocates nothing.
func TestBoundedHitAllocs(t *testing.T) {
	tb := New(100)
	for i := range 100 {
		tb.Add(key(0, sec, fmt.Sprint(i)), 1, 1, 0)
	}
	k := key(0, sec, "7")
	if n := testing.AllocsPerRun(100, func() { tb.Add(k, 1, 1, 0) }); n != 0 {
		t.Errorf("Add on an existing entry: %v allocs", n)
	}
	if n := testing.AllocsPerRun(100, func() { tb.FixedWindow(k, 10, 1, sec) }); n != 0 {
		t.Errorf("FixedWindow on an existing entry: %v allocs", n)
	}
}

// TestExpireAndDeleteLeaveTheRing empties a bounded table by Expire and
// Delete, the hand's entry among the first to go, and fills it again: the
// ring stays whole throughout.
func TestExpireAndDeleteLeaveTheRing(t *testing.T) {
	const size = 50
	tb := New(size)
	for i := range size {
		tb.Add(key(0, sec, fmt.Sprint("id", i)), int64(i%5), 1, 0)
	}
	checkRing(t, tb)
	for b := int64(1); b <= 5; b++ {
		if removed, _ := tb.Expire(b*sec, 3); removed != 3 {
			t.Fatalf("Expire(%ds, 3) removed %d", b, removed)
		}
		checkRing(t, tb)
		tb.Delete(key(0, sec, fmt.Sprint("id", b)))
		checkRing(t, tb)
	}
	tb.Expire(10*sec, 0)
	if tb.Len() != 0 || tb.hand != 0 {
		t.Fatalf("emptied table: Len() = %d, ring %v", tb.Len(), tb.hand != 0)
	}
	for i := range 2 * size {
		tb.Add(key(0, sec, fmt.Sprint("again", i)), 9, 1, 0)
		checkRing(t, tb)
	}
	if tb.Len() != size || tb.Evictions() != size {
		t.Fatalf("Len() = %d, Evictions() = %d, want %d and %d", tb.Len(), tb.Evictions(), size, size)
	}
}

// TestNodeSize checks the layout of a node: 48 bytes, holding the ring's
// links and an id of up to idInline bytes, and no pointer, so that the
// garbage collector never scans the slab.
func TestNodeSize(t *testing.T) {
	if n := unsafe.Sizeof(node{}); n != 48 {
		t.Fatalf("node is %d bytes, want 48", n)
	}
	if n := unsafe.Sizeof([chunkSize]node{}); n%64 != 0 {
		t.Fatalf("a chunk is %d bytes, not whole cache lines", n)
	}
}
