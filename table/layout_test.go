package table

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// checkIndex fails unless the index holds every node of the table exactly
// once, each where a probe from its home finds it, and nothing else.
func checkIndex(t *testing.T, tb *Table) {
	t.Helper()
	slots := 0
	if len(tb.dir) != 1<<tb.depth && tb.dir != nil {
		t.Fatalf("directory of %d parts, depth %d", len(tb.dir), tb.depth)
	}
	for j := 0; j < len(tb.dir); {
		sub := tb.dir[j]
		span := 1 << (tb.depth - sub.depth)
		if j%span != 0 {
			t.Fatalf("part of depth %d at %d of %d", sub.depth, j, len(tb.dir))
		}
		for k := j; k < j+span; k++ {
			if tb.dir[k] != sub {
				t.Fatalf("directory entries %d and %d of a part of depth %d differ", j, k, sub.depth)
			}
		}
		used := 0
		for _, v := range sub.slots {
			if v != 0 {
				used++
				if h := tb.nodeHash(v & nodeMask); h>>(64-tb.depth) < uint64(j) || h>>(64-tb.depth) >= uint64(j+span) {
					t.Fatalf("node %d in the part at %d, its hash says %d", v&nodeMask, j, h>>(64-tb.depth))
				}
			}
		}
		if used != sub.n {
			t.Fatalf("part at %d: %d slots used, n = %d", j, used, sub.n)
		}
		slots += used
		j += span
	}
	if slots != tb.Len() {
		t.Fatalf("index holds %d nodes, the table %d entries", slots, tb.Len())
	}
	tb.ascend(func(i uint32) bool {
		e := tb.at(i)
		if got := tb.find(e.run, tb.idOf(e), tb.nodeHash(i)); got != i {
			t.Fatalf("node %d (%q) found as %d", i, tb.idOf(e), got)
		}
		return true
	})
	checkSeen(t, tb)
}

// checkSeen fails unless what Prefetch sees is the index as it is: the
// directory, each part's slots (the same array) and the runs' numbers.
func checkSeen(t *testing.T, tb *Table) {
	t.Helper()
	v := tb.seen.Load()
	switch {
	case tb.dir == nil && v == &noIndex:
	case tb.dir == nil || v == &noIndex:
		t.Fatalf("directory %v, Prefetch sees one %v", tb.dir != nil, v != &noIndex)
	case v.depth != tb.depth || len(v.parts) != len(tb.dir):
		t.Fatalf("directory of depth %d, %d parts; Prefetch sees %d, %d", tb.depth, len(tb.dir), v.depth, len(v.parts))
	}
	for j, sub := range tb.dir {
		if v.parts[j].Load() != sub {
			t.Fatalf("directory entry %d: Prefetch sees another part", j)
		}
		view := sub.view.Load()
		if view == nil || len(*view) != len(sub.slots) || &(*view)[0] != &sub.slots[0] {
			t.Fatalf("part at %d: Prefetch sees other slots", j)
		}
	}
	var want []seenRun
	for _, r := range tb.runs {
		if r != nil && len(want) < maxSeenRuns {
			want = append(want, seenRun{r.group, r.num})
		}
	}
	var got []seenRun
	if rs := tb.seenRuns.Load(); rs != nil {
		got = *rs
	}
	if !slices.Equal(got, want) {
		t.Fatalf("runs %+v, Prefetch sees %+v", want, got)
	}
}

// randomID returns an id of a length that crosses idInline: empty, short,
// just under, at and over the inline bound, and now and then huge.
func randomID(r *rand.Rand, n int) string {
	base := fmt.Sprintf("k%d-", n)
	switch r.IntN(8) {
	case 0:
		return base
	case 1:
		return base + strings.Repeat("x", idInline-len(base))
	case 2:
		return base + strings.Repeat("y", idInline+1-len(base))
	case 3:
		return base + strings.Repeat("z", 40)
	case 4:
		if r.IntN(50) == 0 {
			return base + strings.Repeat("h", 1<<16)
		}
	}
	return base + "ip"
}

// TestLayoutRandomIDs runs random hits, deletions and sweeps over ids of
// every length against a map, checking the entries, the index and the
// order after each step, and that deleted nodes and long ids are reused,
// not leaked.
func TestLayoutRandomIDs(t *testing.T) {
	for _, limit := range []int{0, 40} {
		t.Run(fmt.Sprint("limit=", limit), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(limit), 7))
			tb := New(limit)
			ids := make([]string, 120)
			for i := range ids {
				ids[i] = randomID(r, i)
			}
			m := map[Key]int64{} // hits per key, for the keys the table should hold
			clock := int64(0)
			for step := range 4_000 {
				clock += r.Int64N(int64(300 * time.Millisecond))
				k := key(uint8(r.IntN(2)), []int64{sec, 3 * sec}[r.IntN(2)], ids[r.IntN(len(ids))])
				switch op := r.IntN(10); {
				case op < 7:
					d := tb.FixedWindow(k, 1<<40, 1, clock)
					if !d.Allowed {
						t.Fatalf("step %d: denied %+v", step, k)
					}
				case op < 8:
					tb.Delete(k)
				default:
					tb.Expire(clock-int64(2*time.Second), r.IntN(5))
				}
				if limit > 0 && tb.Len() > limit {
					t.Fatalf("step %d: %d entries, limit %d", step, tb.Len(), limit)
				}
				checkIndex(t, tb)
				keys := checkOrder(t, tb)
				clear(m)
				for _, k := range keys {
					m[k]++
				}
				for k, n := range m {
					if n != 1 {
						t.Fatalf("step %d: %+v walked %d times", step, k, n)
					}
				}
			}
			// Every id the table ever held fits in the slab and the long
			// ids' slots: no more nodes than keys can exist at once, plus
			// the unused node 0 and a chunk's slack.
			if max := 2*len(ids)*2 + 1; int(tb.nodes.top) > max {
				t.Fatalf("slab used %d nodes for at most %d keys", tb.nodes.top, 2*len(ids)*2)
			}
			if len(tb.long) > 2*len(ids)*2 {
				t.Fatalf("%d long id slots for at most %d keys", len(tb.long), 2*len(ids)*2)
			}
			tb.Expire(1<<62, 0)
			if tb.Len() != 0 || len(tb.long) != len(tb.longFree) || len(tb.groups) != 0 {
				t.Fatalf("emptied table: %d entries, %d long ids of which %d free, %d runs",
					tb.Len(), len(tb.long), len(tb.longFree), len(tb.groups))
			}
			for _, s := range tb.long {
				if s != "" {
					t.Fatalf("an emptied table keeps a long id of %d bytes", len(s))
				}
			}
			checkIndex(t, tb)
		})
	}
}

// TestLayoutFloodReusesNodes inserts and deletes new ids, far more than
// the table ever holds at once: the slab and the index stay the size of
// what it holds.
func TestLayoutFloodReusesNodes(t *testing.T) {
	tb := New(0)
	const live = 100
	for i := range 100 * live {
		tb.Add(key(0, sec, fmt.Sprintf("flood-%d-%s", i, strings.Repeat("l", i%40))), 0, 1, 0)
		if i >= live {
			if !tb.Delete(key(0, sec, fmt.Sprintf("flood-%d-%s", i-live, strings.Repeat("l", (i-live)%40)))) {
				t.Fatalf("id %d not found", i-live)
			}
		}
	}
	if tb.Len() != live || tb.nodes.top > live+2 || len(tb.long) > live+1 {
		t.Fatalf("%d entries in %d nodes and %d long id slots", tb.Len(), tb.nodes.top-1, len(tb.long))
	}
	checkIndex(t, tb)
}

// TestLayoutSameBytesApart checks that keys whose ids share their bytes up
// to idInline, or whose ids are equal under another kind or scale, stay
// apart, and that an id equal to the first bytes of another is not it.
func TestLayoutSameBytesApart(t *testing.T) {
	tb := New(0)
	long := strings.Repeat("a", idInline)
	ids := []string{"", "a", long[:idInline-1], long, long + "a", long + "b", long + "ab", "b" + long}
	n := int64(0)
	for _, id := range ids {
		for kind := range uint8(2) {
			for _, scale := range []int64{sec, sec5} {
				n++
				tb.Add(key(kind, scale, id), 1, n, 0)
			}
		}
	}
	n = 0
	for _, id := range ids {
		for kind := range uint8(2) {
			for _, scale := range []int64{sec, sec5} {
				n++
				if e, ok := tb.Get(key(kind, scale, id)); !ok || e.Count != n {
					t.Fatalf("Get(%d, %d, %q) = %+v, %v, want count %d", kind, scale, id, e, ok, n)
				}
			}
		}
	}
	checkIndex(t, tb)
	checkOrder(t, tb)
}

// TestLayoutIndexSplits grows the index past the size of one part, so
// that parts split and the directory doubles, then deletes and re-adds
// keys: every key stays found, and deleted ones are gone.
func TestLayoutIndexSplits(t *testing.T) {
	tb := New(0)
	const n = 5 * maxSlots
	k := func(i int) Key { return key(uint8(i%3), sec, fmt.Sprintf("split-%d", i)) }
	for i := range n {
		tb.Add(k(i), 0, int64(i), 0)
	}
	if tb.depth < 2 {
		t.Fatalf("%d keys in a directory of depth %d: no split", n, tb.depth)
	}
	checkIndex(t, tb)
	for i := 0; i < n; i += 2 {
		if !tb.Delete(k(i)) {
			t.Fatalf("Delete(%+v) found nothing", k(i))
		}
	}
	checkIndex(t, tb)
	for i := range n {
		e, ok := tb.Get(k(i))
		if ok != (i%2 == 1) || ok && e.Count != int64(i) {
			t.Fatalf("Get(%+v) = %+v, %v", k(i), e, ok)
		}
	}
	for i := 0; i < n; i += 2 {
		tb.Add(k(i), 0, 1, 0)
	}
	if tb.Len() != n {
		t.Fatalf("Len() = %d, want %d", tb.Len(), n)
	}
	checkIndex(t, tb)
}

// TestLayoutSnapshotIDs walks a table of ids across the inline bound in
// chunks of every size: each entry is given once, in order, and the
// records' IDs and the cursor stay what they were after the table has
// forgotten every key and taken others in the same nodes.
func TestLayoutSnapshotIDs(t *testing.T) {
	const now = int64(1_000) * sec
	r := rand.New(rand.NewPCG(5, 6))
	tb := New(0)
	var want []string
	seen := map[string]int64{} // id -> when it was hit
	for i := range 300 {
		id := randomID(r, i)
		if _, ok := seen[id]; ok {
			continue
		}
		seen[id] = now + int64(i%3)*sec
		tb.FixedWindow(key(uint8(algo.FixedWindow), sec, id), 10, 1, seen[id])
	}
	tb.Snapshot(now, func(rec algo.Record) bool {
		want = append(want, rec.ID)
		return true
	})
	if len(want) != len(seen) {
		t.Fatalf("a whole snapshot gave %d records of %d keys", len(want), len(seen))
	}
	for _, max := range []int{1, 2, 7, 1000} {
		var got []string
		cur := algo.Cursor{}
		for more := true; more; {
			more = tb.SnapshotChunk(now, &cur, max, func(rec algo.Record) bool {
				got = append(got, rec.ID)
				return true
			})
		}
		last := cur.ID
		tb2 := strings.Clone(last)
		tb.Expire(1<<62, 0)
		for i := range 300 {
			tb.Add(key(0, sec, fmt.Sprintf("other-%d-%s", i, strings.Repeat("o", i%30))), 0, 1, 0)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("chunks of %d gave %d records, want %d, or another order", max, len(got), len(want))
		}
		if cur.ID != tb2 {
			t.Fatalf("the cursor's ID changed from %q to %q", tb2, cur.ID)
		}
		tb.Expire(1<<62, 0)
		for _, id := range want {
			tb.FixedWindow(key(uint8(algo.FixedWindow), sec, id), 10, 1, seen[id])
		}
	}
}

// TestLayoutIndexFull fills a table past many splits of the index and
// checks how full its parts are: none more than three quarters, none much
// less than three fifths (a part grows by a quarter, rounded up to 8 slots,
// at three quarters, and splits into halves sized two thirds full), so that
// a key costs about 6 bytes of index whatever the number of keys.
func TestLayoutIndexFull(t *testing.T) {
	tb := New(0)
	for i := range 100_000 {
		tb.Add(key(0, sec, fmt.Sprint("full-", i)), 1, 1, 1000)
		if i%20_000 != 19_999 {
			continue
		}
		slots, parts := 0, 0
		for j := 0; j < len(tb.dir); j += 1 << (tb.depth - tb.dir[j].depth) {
			s := tb.dir[j]
			parts++
			slots += len(s.slots)
			if load := float64(s.n) / float64(len(s.slots)); load > 0.75 || load < 0.58 {
				t.Fatalf("%d keys: a part of %d slots holds %d (%.2f full)", tb.Len(), len(s.slots), s.n, load)
			}
		}
		t.Logf("%d keys: %d parts, %.2f bytes of index a key", tb.Len(), parts, float64(4*slots)/float64(tb.Len()))
	}
}
