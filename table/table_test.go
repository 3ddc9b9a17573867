package table

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/actorlimit/actorlimit/algo"
)

const (
	sec  = int64(time.Second)
	sec5 = 5 * sec
	min1 = int64(time.Minute)
)

func key(kind uint8, scale int64, id string) Key { return Key{Kind: kind, Scale: scale, ID: id} }

// entry builds the Entry that Add should return.
func entry(k Key, bucket, count, created, modified int64) Entry {
	return Entry{Key: k, Bucket: bucket, Count: count, Created: created, Modified: modified}
}

// step is one operation on a table and what it must report. Exactly one of
// add, get, del and expire is set; Len and the order are checked after every
// step, and keys, when not nil, is the whole table in Ascend order.
type step struct {
	add    *addOp
	get    *Key
	del    *Key
	expire *expireOp

	want    Entry // Add's result; Get's entry
	ok      bool  // Get's and Delete's report
	removed int   // Expire's count
	more    bool  // Expire's report
	len     int   // Len after the step
	keys    []Key // if not nil, the table's keys in order after the step
}

type addOp struct {
	k              Key
	bucket, n, now int64
}

type expireOp struct {
	before int64
	max    int
}

func runSteps(t *testing.T, tb *Table, steps []step) {
	t.Helper()
	for i, s := range steps {
		switch {
		case s.add != nil:
			a := s.add
			if got := tb.Add(a.k, a.bucket, a.n, a.now); got != s.want {
				t.Fatalf("step %d: Add(%+v, bucket=%d, n=%d, now=%d) = %+v, want %+v", i, a.k, a.bucket, a.n, a.now, got, s.want)
			}
		case s.get != nil:
			if got, ok := tb.Get(*s.get); got != s.want || ok != s.ok {
				t.Fatalf("step %d: Get(%+v) = %+v, %v, want %+v, %v", i, *s.get, got, ok, s.want, s.ok)
			}
		case s.del != nil:
			if ok := tb.Delete(*s.del); ok != s.ok {
				t.Fatalf("step %d: Delete(%+v) = %v, want %v", i, *s.del, ok, s.ok)
			}
		case s.expire != nil:
			removed, more := tb.Expire(s.expire.before, s.expire.max)
			if removed != s.removed || more != s.more {
				t.Fatalf("step %d: Expire(%d, %d) = %d, %v, want %d, %v", i, s.expire.before, s.expire.max, removed, more, s.removed, s.more)
			}
		default:
			t.Fatalf("step %d: no operation", i)
		}
		if got := tb.Len(); got != s.len {
			t.Fatalf("step %d: Len() = %d, want %d", i, got, s.len)
		}
		got := checkOrder(t, tb)
		if s.keys != nil && !slices.Equal(got, s.keys) {
			t.Fatalf("step %d: keys in order = %v, want %v", i, got, s.keys)
		}
	}
}

// compareEntries is the table's order: kind, scale, bucket, id.
func compareEntries(a, b Entry) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Scale, b.Scale),
		cmp.Compare(a.Bucket, b.Bucket), cmp.Compare(a.ID, b.ID))
}

// checkOrder walks the table and fails unless the walk is strictly in
// (kind, scale, bucket, id) order, visits Len entries, and every entry is
// what Get returns for its key. It returns the keys in walk order.
func checkOrder(t *testing.T, tb *Table) []Key {
	t.Helper()
	var keys []Key
	var prev Entry
	tb.Ascend(func(e Entry) bool {
		if len(keys) > 0 && compareEntries(prev, e) >= 0 {
			t.Fatalf("Ascend: %+v before %+v", prev, e)
		}
		if got, ok := tb.Get(e.Key); !ok || got != e {
			t.Fatalf("Ascend gave %+v, Get gives %+v, %v", e, got, ok)
		}
		keys = append(keys, e.Key)
		prev = e
		return true
	})
	if len(keys) != tb.Len() {
		t.Fatalf("Ascend visited %d entries, Len() = %d", len(keys), tb.Len())
	}
	return keys
}

func TestAdd(t *testing.T) {
	alice, bob := key(0, sec, "alice"), key(0, sec, "bob")
	alice5, aliceK1 := key(0, sec5, "alice"), key(1, sec, "alice")
	tests := []struct {
		name  string
		steps []step
	}{
		{"insert then increment", []step{
			{add: &addOp{alice, 10, 1, 10_000}, want: entry(alice, 10, 1, 10_000, 10_000), len: 1},
			{add: &addOp{alice, 10, 2, 10_400}, want: entry(alice, 10, 3, 10_000, 10_400), len: 1},
			{add: &addOp{alice, 10, 0, 10_500}, want: entry(alice, 10, 3, 10_000, 10_500), len: 1},
			{get: &alice, want: entry(alice, 10, 3, 10_000, 10_500), ok: true, len: 1},
		}},
		{"later bucket moves the entry and restarts it", []step{
			{add: &addOp{alice, 10, 5, 10_000}, want: entry(alice, 10, 5, 10_000, 10_000), len: 1},
			{add: &addOp{bob, 10, 1, 10_100}, want: entry(bob, 10, 1, 10_100, 10_100), len: 2,
				keys: []Key{alice, bob}},
			{add: &addOp{alice, 11, 1, 11_200}, want: entry(alice, 11, 1, 11_200, 11_200), len: 2,
				keys: []Key{bob, alice}},
			{add: &addOp{alice, 14, 2, 14_000}, want: entry(alice, 14, 2, 14_000, 14_000), len: 2},
			{get: &alice, want: entry(alice, 14, 2, 14_000, 14_000), ok: true, len: 2},
		}},
		{"earlier bucket counts into the newer window", []step{
			{add: &addOp{alice, 11, 1, 11_000}, want: entry(alice, 11, 1, 11_000, 11_000), len: 1},
			{add: &addOp{alice, 10, 1, 10_900}, want: entry(alice, 11, 2, 11_000, 10_900), len: 1},
			{add: &addOp{alice, 11, 1, 11_100}, want: entry(alice, 11, 3, 11_000, 11_100), len: 1},
		}},
		{"ids, scales and kinds are apart", []step{
			{add: &addOp{alice, 5, 1, 1}, want: entry(alice, 5, 1, 1, 1), len: 1},
			{add: &addOp{alice5, 5, 2, 2}, want: entry(alice5, 5, 2, 2, 2), len: 2},
			{add: &addOp{aliceK1, 5, 3, 3}, want: entry(aliceK1, 5, 3, 3, 3), len: 3},
			{add: &addOp{bob, 5, 4, 4}, want: entry(bob, 5, 4, 4, 4), len: 4},
			{add: &addOp{alice, 5, 1, 5}, want: entry(alice, 5, 2, 1, 5), len: 4,
				keys: []Key{alice, bob, alice5, aliceK1}},
			{get: &alice5, want: entry(alice5, 5, 2, 2, 2), ok: true, len: 4},
		}},
		{"negative buckets", []step{
			{add: &addOp{alice, -2, 1, -1_500}, want: entry(alice, -2, 1, -1_500, -1_500), len: 1},
			{add: &addOp{alice, -1, 1, -500}, want: entry(alice, -1, 1, -500, -500), len: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runSteps(t, New(0), tt.steps) })
	}
}

// TestAddClonesID checks that the table keeps its own copy of an id whose
// bytes the caller later reuses.
func TestAddClonesID(t *testing.T) {
	buf := []byte("alice")
	tb := New(0)
	tb.Add(key(0, sec, unsafe.String(unsafe.SliceData(buf), len(buf))), 1, 1, 1)
	copy(buf, "mallo") // the caller reuses its buffer
	e, ok := tb.Get(key(0, sec, "alice"))
	if !ok || e.ID != "alice" {
		t.Fatalf("after reusing the id's buffer, Get(alice) = %+v, %v, want the entry with ID alice", e, ok)
	}
	if got := checkOrder(t, tb); len(got) != 1 || got[0].ID != "alice" {
		t.Fatalf("keys = %v, want [alice]", got)
	}
}

func TestAscendOrder(t *testing.T) {
	want := []Entry{
		{Key: key(0, sec, "b"), Bucket: -1},
		{Key: key(0, sec, "a"), Bucket: 7},
		{Key: key(0, sec, "c"), Bucket: 8},
		{Key: key(0, sec5, "a"), Bucket: 1},
		{Key: key(0, min1, "a"), Bucket: 0},
		{Key: key(1, sec, "z"), Bucket: 0},
		{Key: key(1, sec5, "a"), Bucket: 0},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 5 {
		tb := New(0)
		for _, i := range r.Perm(len(want)) {
			tb.Add(want[i].Key, want[i].Bucket, 1, 0)
		}
		var got []Entry
		tb.Ascend(func(e Entry) bool {
			got = append(got, Entry{Key: e.Key, Bucket: e.Bucket})
			return true
		})
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: Ascend order = %v, want %v", round, got, want)
		}
		visited := 0
		tb.Ascend(func(Entry) bool { visited++; return visited < 3 })
		if visited != 3 {
			t.Fatalf("round %d: Ascend went on after fn returned false: visited %d, want 3", round, visited)
		}
	}
}

func TestGetDeleteLen(t *testing.T) {
	alice, alice5, bob := key(0, sec, "alice"), key(0, sec5, "alice"), key(0, sec, "bob")
	runSteps(t, New(0), []step{
		{get: &alice, want: Entry{}, ok: false, len: 0},
		{del: &alice, ok: false, len: 0},
		{add: &addOp{alice, 3, 1, 3_000}, want: entry(alice, 3, 1, 3_000, 3_000), len: 1},
		{add: &addOp{alice5, 0, 1, 3_000}, want: entry(alice5, 0, 1, 3_000, 3_000), len: 2},
		{add: &addOp{bob, 3, 1, 3_000}, want: entry(bob, 3, 1, 3_000, 3_000), len: 3},
		{get: &alice, want: entry(alice, 3, 1, 3_000, 3_000), ok: true, len: 3},
		{del: &alice, ok: true, len: 2, keys: []Key{bob, alice5}},
		{del: &alice, ok: false, len: 2},
		{get: &alice, want: Entry{}, ok: false, len: 2},
		{get: &alice5, want: entry(alice5, 0, 1, 3_000, 3_000), ok: true, len: 2},
		{add: &addOp{alice, 4, 1, 4_000}, want: entry(alice, 4, 1, 4_000, 4_000), len: 3},
		{del: &bob, ok: true, len: 2},
		{del: &alice5, ok: true, len: 1},
		{del: &alice, ok: true, len: 0, keys: []Key{}},
	})
}

func TestExpire(t *testing.T) {
	// Windows: a1 [9s,10s), b1 [10s,11s), c1 [11s,12s); a5 [5s,10s), b5 [10s,15s);
	// m [0,60s); k1 (kind 1) [9s,10s).
	a1, b1, c1 := key(0, sec, "a1"), key(0, sec, "b1"), key(0, sec, "c1")
	a5, b5, m := key(0, sec5, "a5"), key(0, sec5, "b5"), key(0, min1, "m")
	k1 := key(1, sec, "k1")
	fill := []step{
		{add: &addOp{a1, 9, 1, 0}, want: entry(a1, 9, 1, 0, 0), len: 1},
		{add: &addOp{b1, 10, 1, 0}, want: entry(b1, 10, 1, 0, 0), len: 2},
		{add: &addOp{c1, 11, 1, 0}, want: entry(c1, 11, 1, 0, 0), len: 3},
		{add: &addOp{a5, 1, 1, 0}, want: entry(a5, 1, 1, 0, 0), len: 4},
		{add: &addOp{b5, 2, 1, 0}, want: entry(b5, 2, 1, 0, 0), len: 5},
		{add: &addOp{m, 0, 1, 0}, want: entry(m, 0, 1, 0, 0), len: 6},
		{add: &addOp{k1, 9, 1, 0}, want: entry(k1, 9, 1, 0, 0), len: 7},
	}
	ex := func(before int64, max int) *expireOp { return &expireOp{before, max} }
	tests := []struct {
		name  string
		steps []step
	}{
		{"nothing has ended", []step{
			{expire: ex(10*sec-1, 0), removed: 0, len: 7},
		}},
		{"window end equal to before is expired", []step{
			{expire: ex(10*sec, 0), removed: 3, len: 4, keys: []Key{b1, c1, b5, m}},
			{expire: ex(10*sec, 0), removed: 0, len: 4},
		}},
		{"one nanosecond short of an end", []step{
			{expire: ex(11*sec-1, 0), removed: 3, len: 4, keys: []Key{b1, c1, b5, m}},
			{expire: ex(11*sec, 0), removed: 1, len: 3, keys: []Key{c1, b5, m}},
		}},
		{"across scales and kinds", []step{
			{expire: ex(15*sec, 0), removed: 6, len: 1, keys: []Key{m}},
			{expire: ex(60*sec, 0), removed: 1, len: 0, keys: []Key{}},
		}},
		{"a moved entry is live again", []step{
			{add: &addOp{a1, 12, 1, 0}, want: entry(a1, 12, 1, 0, 0), len: 7},
			{expire: ex(12*sec, 0), removed: 4, len: 3, keys: []Key{a1, b5, m}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := New(0)
			runSteps(t, tb, fill)
			runSteps(t, tb, tt.steps)
		})
	}
}

// TestExpireMax checks the bound on a table of one window length, where
// which entries go first and what more says are both exact: the oldest first,
// and more is true iff dead entries remain. (With several window lengths a
// call that removes exactly max may report more with none left; see
// TestExpireMaxAcrossScales.)
func TestExpireMax(t *testing.T) {
	d, a, b, c := key(0, sec, "d"), key(0, sec, "a"), key(0, sec, "b"), key(0, sec, "c")
	live := key(0, sec, "live")
	ex := func(max int) *expireOp { return &expireOp{12 * sec, max} }
	runSteps(t, New(0), []step{
		{add: &addOp{c, 11, 1, 0}, want: entry(c, 11, 1, 0, 0), len: 1},
		{add: &addOp{b, 10, 1, 0}, want: entry(b, 10, 1, 0, 0), len: 2},
		{add: &addOp{a, 9, 1, 0}, want: entry(a, 9, 1, 0, 0), len: 3},
		{add: &addOp{d, 3, 1, 0}, want: entry(d, 3, 1, 0, 0), len: 4},
		{add: &addOp{live, 12, 1, 0}, want: entry(live, 12, 1, 0, 0), len: 5},
		{expire: ex(1), removed: 1, more: true, len: 4, keys: []Key{a, b, c, live}},
		{expire: ex(2), removed: 2, more: true, len: 2, keys: []Key{c, live}},
		{expire: ex(1), removed: 1, more: false, len: 1, keys: []Key{live}},
		{expire: ex(1), removed: 0, more: false, len: 1},
		{expire: ex(-1), removed: 0, more: false, len: 1},
	})
}

// TestExpireMaxAcrossScales checks the bound when the dead entries are spread
// over several window lengths: every call removes at most max, more is true
// while dead entries remain, and repeated calls finish the job.
func TestExpireMaxAcrossScales(t *testing.T) {
	scales := []int64{sec, sec5, min1, 7 * sec}
	const before = 1_000 * sec
	for _, bound := range []int{1, 2, 3, 7, 50} {
		t.Run(fmt.Sprintf("max=%d", bound), func(t *testing.T) {
			tb := New(0)
			dead, live := 0, 0
			for i, s := range scales {
				for j := range 10 {
					b := algo.FloorDiv(before, s) - 1 - int64(j) // ended at or before `before`
					if j%3 == 0 {
						b = algo.FloorDiv(before, s) + int64(j%2) // not ended yet
						live++
					} else {
						dead++
					}
					tb.Add(key(uint8(i%2), s, fmt.Sprint("id", j)), b, 1, 0)
				}
			}
			for call := 0; ; call++ {
				removed, more := tb.Expire(before, bound)
				dead -= removed
				if removed > bound || removed < 0 {
					t.Fatalf("call %d: removed %d, bound %d", call, removed, bound)
				}
				if dead > 0 && (!more || removed < bound) {
					t.Fatalf("call %d: Expire = %d, %v with %d dead entries left", call, removed, more, dead)
				}
				if removed < bound && more {
					t.Fatalf("call %d: Expire = %d, %v: under bound, yet more", call, removed, more)
				}
				if !more {
					break
				}
				if call > 100 {
					t.Fatal("Expire never reports done")
				}
			}
			if dead != 0 || tb.Len() != live {
				t.Fatalf("done with %d dead left, Len() = %d, want 0 and %d", dead, tb.Len(), live)
			}
			tb.Ascend(func(e Entry) bool {
				if e.End() <= before {
					t.Errorf("dead entry left: %+v", e)
				}
				return true
			})
		})
	}
}

// TestMemoryBound checks which entry a full table evicts: the first the
// eviction ring's hand finds with no chance left, a hit giving its entry one.
func TestMemoryBound(t *testing.T) {
	x, y, z := key(0, sec, "x"), key(0, sec5, "y"), key(1, sec, "z")
	// In the ring in this order, none of them hit since its insert; x has
	// the latest window, which makes no difference.
	fill := []step{
		{add: &addOp{x, 900, 1, 0}, want: entry(x, 900, 1, 0, 0), len: 1},
		{add: &addOp{y, 21, 1, 0}, want: entry(y, 21, 1, 0, 0), len: 2},
		{add: &addOp{z, 101, 1, 0}, want: entry(z, 101, 1, 0, 0), len: 3},
	}
	n, w, v := key(0, sec, "new"), key(0, sec, "w"), key(0, sec, "v")
	tests := []struct {
		name      string
		steps     []step
		evictions uint64
	}{
		{"idle entries go in the order they came, across scales and kinds", []step{
			{add: &addOp{n, 1, 1, 0}, want: entry(n, 1, 1, 0, 0), len: 3, keys: []Key{n, y, z}},
			{add: &addOp{w, 1, 1, 0}, want: entry(w, 1, 1, 0, 0), len: 3, keys: []Key{n, w, z}},
			// x was evicted: inserting it again evicts z, then it is the newest.
			{add: &addOp{x, 1, 1, 0}, want: entry(x, 1, 1, 0, 0), len: 3, keys: []Key{n, w, x}},
		}, 3},
		{"a hit entry survives one pass of the hand", []step{
			{add: &addOp{x, 900, 1, 0}, want: entry(x, 900, 2, 0, 0), len: 3},
			{add: &addOp{n, 1, 1, 0}, want: entry(n, 1, 1, 0, 0), len: 3, keys: []Key{n, x, z}},
			{add: &addOp{w, 1, 1, 0}, want: entry(w, 1, 1, 0, 0), len: 3, keys: []Key{n, w, x}},
			// The hand passed x once already, and x has had no hit since.
			{add: &addOp{v, 1, 1, 0}, want: entry(v, 1, 1, 0, 0), len: 3, keys: []Key{n, v, w}},
		}, 3},
		{"an entry hit between passes stays", []step{
			{add: &addOp{x, 900, 1, 0}, want: entry(x, 900, 2, 0, 0), len: 3},
			{add: &addOp{n, 1, 1, 0}, want: entry(n, 1, 1, 0, 0), len: 3, keys: []Key{n, x, z}},
			{add: &addOp{x, 900, 1, 0}, want: entry(x, 900, 3, 0, 0), len: 3},
			{add: &addOp{w, 1, 1, 0}, want: entry(w, 1, 1, 0, 0), len: 3, keys: []Key{n, w, x}},
			{add: &addOp{x, 900, 1, 0}, want: entry(x, 900, 4, 0, 0), len: 3},
			{add: &addOp{v, 1, 1, 0}, want: entry(v, 1, 1, 0, 0), len: 3, keys: []Key{v, w, x}},
		}, 3},
		{"hits on existing entries evict nothing", []step{
			{add: &addOp{x, 900, 1, 0}, want: entry(x, 900, 2, 0, 0), len: 3},
			{add: &addOp{y, 30, 1, 0}, want: entry(y, 30, 1, 0, 0), len: 3},
		}, 0},
		{"room made by Delete is used first", []step{
			{del: &z, ok: true, len: 2},
			{add: &addOp{n, 1, 1, 0}, want: entry(n, 1, 1, 0, 0), len: 3, keys: []Key{n, x, y}},
		}, 0},
		{"the hand moves on from a deleted entry", []step{
			{del: &x, ok: true, len: 2},
			{add: &addOp{n, 1, 1, 0}, want: entry(n, 1, 1, 0, 0), len: 3, keys: []Key{n, y, z}},
			{add: &addOp{w, 1, 1, 0}, want: entry(w, 1, 1, 0, 0), len: 3, keys: []Key{n, w, z}},
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := New(3)
			runSteps(t, tb, fill)
			runSteps(t, tb, tt.steps)
			if got := tb.Evictions(); got != tt.evictions {
				t.Fatalf("Evictions() = %d, want %d", got, tt.evictions)
			}
			checkRing(t, tb)
		})
	}
	for _, limit := range []int{0, -5} {
		tb := New(limit)
		for i := range 100 {
			tb.Add(key(0, sec, fmt.Sprint(i)), int64(i), 1, 0)
		}
		if tb.Limit() != 0 || tb.Len() != 100 || tb.Evictions() != 0 || tb.hand != 0 {
			t.Errorf("New(%d): Limit %d, Len %d, Evictions %d, ring %v, want 0, 100, 0, none", limit, tb.Limit(), tb.Len(), tb.Evictions(), tb.hand != 0)
		}
	}
}

// TestMemoryBoundFlood floods a bounded table with random ids, each hit
// once, one window after another: it never holds more than its limit, counts
// every eviction, and what stays is the newest ids, here the newest windows.
func TestMemoryBoundFlood(t *testing.T) {
	const limit, hits = 1_000, 50_000
	tb := New(limit)
	r := rand.New(rand.NewPCG(3, 4))
	inserts := 0
	for i := range hits {
		k := key(uint8(i%2), []int64{sec, sec5}[i%2], fmt.Sprintf("%016x", r.Uint64()))
		bucket := int64(i) // start i s (1 s scale) or 5i s (5 s scale)
		if k.Scale == sec5 {
			bucket = int64(i) / 5
		}
		if _, ok := tb.Get(k); !ok {
			inserts++
		}
		tb.Add(k, bucket, 1, 0)
		if tb.Len() > limit {
			t.Fatalf("hit %d: Len() = %d > limit %d", i, tb.Len(), limit)
		}
	}
	if got, want := tb.Evictions(), uint64(inserts-tb.Len()); got != want {
		t.Fatalf("Evictions() = %d, want %d", got, want)
	}
	tb.Ascend(func(e Entry) bool {
		if e.Start() < int64(hits-limit-5)*sec {
			t.Errorf("an old entry survived the flood: %+v", e)
		}
		return true
	})
}

// model is the reference the property test holds the table to.
type model map[Key]Entry

func (m model) add(k Key, bucket, n, now int64) Entry {
	e, ok := m[k]
	switch {
	case !ok:
		e = Entry{Key: k, Bucket: bucket, Created: now}
	case bucket > e.Bucket:
		e.Bucket, e.Count, e.Created = bucket, 0, now
	}
	e.Count += n
	e.Modified = now
	m[k] = e
	return e
}

// TestRandomOps runs random operations on a table and on a map (and, for a
// bounded table, a model of its eviction ring) and compares them after every
// step; Ascend must walk the table in order.
func TestRandomOps(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 99))
			limit := []int{0, 12}[seed%2]
			tb, m, ring := New(limit), model{}, newClockModel()
			scales := []int64{sec, sec5, 3 * sec}
			clock := int64(0)
			for i := range 3_000 {
				clock += r.Int64N(400 * int64(time.Millisecond))
				now := clock - r.Int64N(int64(2*time.Second)) // sometimes behind: a clock step back
				k := key(uint8(r.IntN(2)), scales[r.IntN(len(scales))], fmt.Sprint("id", r.IntN(15)))
				switch op := r.IntN(10); {
				case op < 7:
					randomAdd(t, i, tb, m, ring, k, r.Int64N(3), now)
				case op < 8:
					_, want := m[k]
					delete(m, k)
					ring.remove(k)
					if got := tb.Delete(k); got != want {
						t.Fatalf("step %d: Delete(%+v) = %v, want %v", i, k, got, want)
					}
				default:
					randomExpire(t, i, r, tb, m, clock)
					ring.keep(m)
				}
				compareModel(t, i, tb, m)
				if limit > 0 {
					checkRing(t, tb)
				}
			}
		})
	}
}

// randomAdd adds n hits for k to tb, m and ring, and checks that a full
// table evicts the entry the ring's model says.
func randomAdd(t *testing.T, step int, tb *Table, m model, ring *clockModel, k Key, n, now int64) {
	t.Helper()
	_, had := m[k]
	got := tb.Add(k, algo.FloorDiv(now, k.Scale), n, now/1e6)
	switch {
	case had:
		ring.hit(k)
	case tb.Limit() > 0 && len(m) == tb.Limit():
		want := ring.evict()
		if victim := evicted(t, tb, m); victim.Key != want {
			t.Fatalf("step %d: evicted %+v, the ring's model says %+v", step, victim, want)
		}
		fallthrough
	default:
		ring.insert(k)
	}
	if want := m.add(k, algo.FloorDiv(now, k.Scale), n, now/1e6); got != want {
		t.Fatalf("step %d: Add(%+v) = %+v, want %+v", step, k, got, want)
	}
}

// evicted finds the one entry of m that the table no longer holds, removes it
// from m and returns it.
func evicted(t *testing.T, tb *Table, m model) Entry {
	t.Helper()
	var gone []Entry
	for k, e := range m {
		if _, ok := tb.Get(k); !ok {
			gone = append(gone, e)
			delete(m, k)
		}
	}
	if len(gone) != 1 {
		t.Fatalf("a full table's insert removed %d entries, want 1: %v", len(gone), gone)
	}
	return gone[0]
}

func randomExpire(t *testing.T, step int, r *rand.Rand, tb *Table, m model, clock int64) {
	t.Helper()
	before, bound := clock-r.Int64N(int64(6*time.Second)), r.IntN(4)
	dead := 0
	for _, e := range m {
		if e.End() <= before {
			dead++
		}
	}
	removed, more := tb.Expire(before, bound)
	want := dead
	if bound > 0 {
		want = min(dead, bound)
	}
	if removed != want || (dead > removed && !more) {
		t.Fatalf("step %d: Expire(%d, %d) = %d, %v with %d dead", step, before, bound, removed, more, dead)
	}
	for k, e := range m {
		if _, ok := tb.Get(k); !ok {
			if e.End() > before {
				t.Fatalf("step %d: Expire(%d, %d) deleted a live entry %+v", step, before, bound, e)
			}
			delete(m, k)
		}
	}
}

func compareModel(t *testing.T, step int, tb *Table, m model) {
	t.Helper()
	if tb.Len() != len(m) {
		t.Fatalf("step %d: Len() = %d, want %d", step, tb.Len(), len(m))
	}
	for k, want := range m {
		if got, ok := tb.Get(k); !ok || got != want {
			t.Fatalf("step %d: Get(%+v) = %+v, %v, want %+v", step, k, got, ok, want)
		}
	}
	checkOrder(t, tb)
}
