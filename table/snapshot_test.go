package table_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/table"
)

// snapEpoch is a Unix time (ns) in 2023.
const snapEpoch = int64(1_700_000_000_123) * int64(time.Millisecond)

// snapPolicies are one policy per algorithm, with periods that are not
// round, and a second limit that the round trips switch to at times.
var snapPolicies = []struct {
	a                    algo.Algorithm
	period               time.Duration
	limit, limit2, burst int64
}{
	{algo.FixedWindow, 1500 * time.Millisecond, 5, 3, 0},
	{algo.SlidingWindow, 1200 * time.Millisecond, 7, 4, 0},
	{algo.SlidingLog, 900 * time.Millisecond, 9, 5, 0},
	{algo.GCRA, time.Second, 3, 7, 4},
	{algo.TokenBucket, 1500 * time.Millisecond, 6, 2, 8},
	{algo.LeakyBucket, 700 * time.Millisecond, 4, 9, 2},
}

// snapshotAll returns every record of tb's snapshot at now, with copies of
// their states.
func snapshotAll(tb *table.Table, now int64) []algo.Record {
	var rs []algo.Record
	tb.Snapshot(now, func(r algo.Record) bool {
		r.State = bytes.Clone(r.State)
		rs = append(rs, r)
		return true
	})
	return rs
}

// Loading a table's snapshot into a new table gives a table that decides
// every later check exactly as the original, for every algorithm, over
// random sequences of hits of 1 to 3, peeks, resets and changes of limit,
// at random times (the clock stepping back now and then); and whose own
// snapshot is the same.
func TestSnapshotRoundTrip(t *testing.T) {
	for _, p := range snapPolicies {
		t.Run(p.a.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(p.a), 11))
			for round := range 40 {
				orig, now := table.New(0), snapEpoch+r.Int64N(int64(time.Hour))
				ids := []string{"a", "b", "c", "d"}
				check := func() algo.Check {
					c := algo.Check{Op: algo.OpHit, Algorithm: p.a, ID: ids[r.IntN(len(ids))], Period: p.period, Limit: p.limit, Burst: algo.Burst(p.limit, p.burst), N: 1 + r.Int64N(3)}
					switch r.IntN(20) {
					case 0:
						c.Op = algo.OpPeek
					case 1:
						c.Op = algo.OpReset
					case 2, 3:
						c.Limit = p.limit2
						c.Burst = algo.Burst(p.limit2, p.burst)
					}
					return c
				}
				step := func() int64 {
					if r.IntN(30) == 0 {
						return -r.Int64N(int64(p.period) / 2) // a clock stepping back
					}
					return r.Int64N(int64(p.period) / 3)
				}
				for range r.IntN(60) {
					now += step()
					c := check()
					orig.Apply(&c, now)
				}
				now += step()
				recs := snapshotAll(orig, now)
				cp := table.New(0)
				for _, rec := range recs {
					if err := cp.Load(now, rec); err != nil {
						t.Fatalf("round %d: Load %+v: %v", round, rec, err)
					}
				}
				if got := snapshotAll(cp, now); fmt.Sprint(got) != fmt.Sprint(recs) {
					t.Fatalf("round %d: the copy's snapshot\n%v\nis not the original's\n%v", round, got, recs)
				}
				// A state dead at the snapshot's time is left out of it: the
				// clock may step back after it, but not to before it.
				at := now
				for i := range 100 {
					now = max(at, now+step())
					c := check()
					want, got := orig.Apply(&c, now), cp.Apply(&c, now)
					if got != want {
						t.Fatalf("round %d, check %d: %v of %q (n %d, limit %d) at %v: the copy says %+v, the original %+v",
							round, i, c.Op, c.ID, c.N, c.Limit, time.Duration(now-snapEpoch), got, want)
					}
				}
			}
		})
	}
}

// Record gives the record Snapshot gives for the same key, in a slice of
// its own, and a nil State for a key without state; loading a nil State
// deletes the key's state; Snapshot stops when fn returns false.
func TestRecord(t *testing.T) {
	for _, p := range snapPolicies {
		t.Run(p.a.String(), func(t *testing.T) {
			tb := table.New(0)
			c := algo.Check{Op: algo.OpHit, Algorithm: p.a, ID: "k", Period: p.period, Limit: p.limit, Burst: algo.Burst(p.limit, p.burst), N: 2}
			tb.Apply(&c, snapEpoch)
			c2 := c
			c2.ID = "l"
			tb.Apply(&c2, snapEpoch)
			rec := tb.Record(&c)
			if rec.State == nil || rec.Death <= snapEpoch || rec.ID != "k" || rec.Algorithm != p.a || rec.Period != p.period {
				t.Fatalf("Record = %+v, want k's live state", rec)
			}
			n := 0
			tb.Snapshot(snapEpoch, func(s algo.Record) bool {
				n++
				if s.ID != rec.ID || s.Death != rec.Death || !bytes.Equal(s.State, rec.State) {
					t.Errorf("Snapshot gave %+v, Record %+v", s, rec)
				}
				return false
			})
			if n != 1 {
				t.Fatalf("Snapshot called fn %d times after it returned false", n)
			}
			none := c
			none.ID = "none"
			if r := tb.Record(&none); r.State != nil || r.ID != "none" {
				t.Fatalf("Record of a key without state = %+v", r)
			}
			if err := tb.Load(snapEpoch, algo.Record{Algorithm: p.a, Period: p.period, ID: "k"}); err != nil {
				t.Fatal(err)
			}
			if r := tb.Record(&c); r.State != nil || tb.Len() != 1 {
				t.Fatalf("after loading a nil State: Record %+v, Len %d", r, tb.Len())
			}
		})
	}
}

// Records dead at now are left out of a snapshot and ignored by Load,
// which then keeps the key's own state.
func TestSnapshotDead(t *testing.T) {
	for _, p := range snapPolicies {
		t.Run(p.a.String(), func(t *testing.T) {
			tb := table.New(0)
			c := algo.Check{Op: algo.OpHit, Algorithm: p.a, ID: "k", Period: p.period, Limit: p.limit, Burst: algo.Burst(p.limit, p.burst), N: 1}
			tb.Apply(&c, snapEpoch)
			rec := tb.Record(&c)
			if got := snapshotAll(tb, rec.Death-1); len(got) != 1 {
				t.Fatalf("snapshot just before the death: %d records, want 1", len(got))
			}
			if got := snapshotAll(tb, rec.Death); len(got) != 0 {
				t.Fatalf("snapshot at the death: %v, want none", got)
			}
			dst := table.New(0)
			if err := dst.Load(rec.Death, rec); err != nil || dst.Len() != 0 {
				t.Fatalf("Load at the death: %v, Len %d; want nil, 0", err, dst.Len())
			}
			lying := rec
			lying.Death = snapEpoch // a Death that says dead: ignored
			if err := dst.Load(snapEpoch+1, lying); err != nil || dst.Len() != 0 {
				t.Fatalf("Load of a record whose Death is past: %v, Len %d; want nil, 0", err, dst.Len())
			}
		})
	}
}

// Load refuses records that do not decode, or whose key no check could
// have, with an error that wraps table.ErrRecord and says what is wrong;
// a refused record changes nothing.
func TestLoadRejects(t *testing.T) {
	for _, p := range snapPolicies {
		t.Run(p.a.String(), func(t *testing.T) {
			tb := table.New(0)
			c := algo.Check{Op: algo.OpHit, Algorithm: p.a, ID: "k", Period: p.period, Limit: p.limit, Burst: algo.Burst(p.limit, p.burst), N: 2}
			tb.Apply(&c, snapEpoch)
			good := tb.Record(&c)
			with := func(f func(r *algo.Record)) algo.Record {
				r := good
				r.State = bytes.Clone(good.State)
				f(&r)
				return r
			}
			tests := []struct {
				name string
				rec  algo.Record
				want string
			}{
				{"empty state", with(func(r *algo.Record) { r.State = []byte{} }), "empty"},
				{"other version", with(func(r *algo.Record) { r.State[0] = 9 }), "version 9"},
				{"truncated", with(func(r *algo.Record) { r.State = r.State[:len(r.State)-1] }), ""},
				{"trailing byte", with(func(r *algo.Record) { r.State = append(r.State, 0) }), ""},
				{"unknown algorithm", with(func(r *algo.Record) { r.Algorithm = 77 }), "unknown algorithm"},
				{"empty id", with(func(r *algo.Record) { r.ID = "" }), "empty ID"},
				{"zero period", with(func(r *algo.Record) { r.Period = 0 }), "not positive"},
			}
			if p.a.Windowed() {
				tests = append(tests, struct {
					name string
					rec  algo.Record
					want string
				}{"sub-millisecond period", with(func(r *algo.Record) { r.Period += time.Microsecond }), "whole milliseconds"})
			}
			for _, tt := range tests {
				before := snapshotAll(tb, snapEpoch)
				err := tb.Load(snapEpoch, tt.rec)
				if !errors.Is(err, table.ErrRecord) {
					t.Errorf("%s: Load = %v, want an error wrapping ErrRecord", tt.name, err)
					continue
				}
				if tt.want != "" && !bytes.Contains([]byte(err.Error()), []byte(tt.want)) {
					t.Errorf("%s: error %q does not say %q", tt.name, err, tt.want)
				}
				if after := snapshotAll(tb, snapEpoch); fmt.Sprint(after) != fmt.Sprint(before) {
					t.Errorf("%s: a refused record changed the table", tt.name)
				}
			}
		})
	}
}

// enc returns s's binary encoding.
func enc(s interface{ AppendBinary([]byte) ([]byte, error) }) []byte {
	b, _ := s.AppendBinary(nil)
	return b
}

// Load refuses states whose fields no state of the algorithm holds, or
// that lie too far from now for the arithmetic.
func TestLoadRejectsStates(t *testing.T) {
	ms := int64(time.Millisecond)
	slots := func(count, base int64, pairs ...byte) []byte {
		b := enc(&algo.SlotState{Count: count, Base: base})
		return append(b, pairs...)
	}
	cur := snapEpoch / ms
	tests := []struct {
		name   string
		a      algo.Algorithm
		period time.Duration
		state  []byte
	}{
		{"fixed window with a negative count", algo.FixedWindow, time.Second, enc(&algo.FixedState{Window: snapEpoch / int64(time.Second), Count: -1000})},
		{"fixed window two windows ahead", algo.FixedWindow, time.Second, enc(&algo.FixedState{Window: snapEpoch/int64(time.Second) + 2, Count: 1})},
		{"fixed window ending after 2262", algo.FixedWindow, time.Duration(math.MaxInt64/3*2/ms) * time.Millisecond, enc(&algo.FixedState{Window: 1, Count: 1})},
		{"bucket without a rate", algo.GCRA, time.Second, enc(&algo.BucketState{Empty: snapEpoch + 1})},
		{"bucket fraction not below the rate", algo.TokenBucket, time.Second, enc(&algo.BucketState{Empty: snapEpoch + 1, Frac: 3, Rate: 3})},
		{"bucket empty in 200 years", algo.LeakyBucket, time.Second, enc(&algo.BucketState{Empty: snapEpoch + 2*int64(algo.MaxSpan), Rate: 3})},
		{"slots without a pair", algo.SlidingLog, time.Second, slots(0, cur)},
		{"slot counts not the count", algo.SlidingLog, time.Second, slots(5, cur, 0)},
		{"two pairs of one slot", algo.SlidingLog, time.Second, slots(2, cur, 0, 0)},
		{"pair of unknown kind", algo.SlidingLog, time.Second, slots(1, cur, 3)},
		{"slots in 50 years", algo.SlidingLog, time.Second, slots(1, cur+50*365*24*3600*1000, 0)},
	}
	for _, tt := range tests {
		tb := table.New(0)
		err := tb.Load(snapEpoch, algo.Record{Algorithm: tt.a, Period: tt.period, ID: "k", Death: math.MaxInt64, State: tt.state})
		if !errors.Is(err, table.ErrRecord) || !errors.Is(err, algo.ErrState) || tb.Len() != 0 {
			t.Errorf("%s: Load = %v with %d entries, want an ErrRecord and ErrState and none", tt.name, err, tb.Len())
		}
	}
}

// Load replaces the key's own state, and a loaded key counts toward the
// memory bound: loading into a full table evicts.
func TestLoadReplaces(t *testing.T) {
	src := table.New(0)
	c := algo.Check{Op: algo.OpHit, Algorithm: algo.FixedWindow, ID: "k", Period: time.Second, Limit: 10, N: 4}
	src.Apply(&c, snapEpoch)
	rec := src.Record(&c)
	dst := table.New(2)
	one := c
	one.N = 1
	dst.Apply(&one, snapEpoch)
	other := one
	other.ID = "other"
	dst.Apply(&other, snapEpoch)
	if err := dst.Load(snapEpoch, rec); err != nil {
		t.Fatal(err)
	}
	if d := dst.Apply(&one, snapEpoch); d.Count != 5 {
		t.Fatalf("after Load, a hit counts %d, want 5 (the loaded 4 and 1)", d.Count)
	}
	third := one
	third.ID = "third"
	rec3 := src.Record(&third) // no state: nil
	if err := dst.Load(snapEpoch, rec3); err != nil || dst.Len() != 2 {
		t.Fatalf("Load of a nil State: %v, Len %d", err, dst.Len())
	}
	src.Apply(&third, snapEpoch)
	if err := dst.Load(snapEpoch, src.Record(&third)); err != nil || dst.Len() != 2 || dst.Evictions() != 1 {
		t.Fatalf("Load into a full table: %v, Len %d, Evictions %d; want nil, 2, 1", err, dst.Len(), dst.Evictions())
	}
}

// FuzzLoad checks what Load accepts, not only that nothing panics: a
// refused record is an ErrRecord and changes nothing; after an accepted
// one, every later decision is one a state of the algorithm can give
// (Count >= 0, 0 <= Remaining <= the capacity, allowed iff RetryAfter is 0,
// ResetAfter and Delay >= 0, a peek agreeing with the hit of 1 after it),
// and the loaded key allows no more hits than a key with no state would:
// a state from outside can only have counted hits, never granted any.
func FuzzLoad(f *testing.F) {
	for _, p := range snapPolicies {
		tb := table.New(0)
		c := algo.Check{Op: algo.OpHit, Algorithm: p.a, ID: "k", Period: p.period, Limit: p.limit, Burst: algo.Burst(p.limit, p.burst), N: 3}
		tb.Apply(&c, snapEpoch)
		c.N = 1
		tb.Apply(&c, snapEpoch+int64(p.period)/7)
		f.Add(uint8(p.a), tb.Record(&c).State)
	}
	f.Add(uint8(algo.FixedWindow), enc(&algo.FixedState{Window: snapEpoch / int64(1500*time.Millisecond), Count: -1000}))
	f.Fuzz(func(t *testing.T, a uint8, state []byte) {
		p := snapPolicies[int(a)%len(snapPolicies)]
		tb := table.New(0)
		c := algo.Check{Op: algo.OpHit, Algorithm: p.a, ID: "k", Period: p.period, Limit: p.limit, Burst: algo.Burst(p.limit, p.burst), N: 1}
		tb.Apply(&c, snapEpoch)
		before := snapshotAll(tb, snapEpoch)
		rec := algo.Record{Algorithm: p.a, Period: p.period, ID: "k", Death: math.MaxInt64, State: state}
		if err := tb.Load(snapEpoch, rec); err != nil {
			if !errors.Is(err, table.ErrRecord) {
				t.Fatalf("Load: %v, not an ErrRecord", err)
			}
			if after := snapshotAll(tb, snapEpoch); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("a refused record changed the table: %v, then %v", before, after)
			}
			return
		}
		fresh := table.New(0)
		capacity := algo.Capacity(p.a, p.limit, p.burst)
		var loaded, empty int64
		for i := range int64(9) {
			now := snapEpoch + i*int64(p.period)/3
			peek := c
			peek.Op = algo.OpPeek
			pd := tb.Apply(&peek, now)
			d := tb.Apply(&c, now)
			for _, d := range []algo.Decision{pd, d} {
				switch {
				case d.Count < 0 || d.Remaining < 0 || d.Remaining > capacity:
					t.Fatalf("step %d: Count %d, Remaining %d of a capacity of %d", i, d.Count, d.Remaining, capacity)
				case d.Allowed != (d.RetryAfter == 0):
					t.Fatalf("step %d: RetryAfter %v for Allowed %v", i, d.RetryAfter, d.Allowed)
				case d.ResetAfter < 0 || d.Delay < 0:
					t.Fatalf("step %d: negative ResetAfter or Delay: %+v", i, d)
				}
			}
			if pd.Allowed != d.Allowed || d.Allowed && d.Count != pd.Count+1 {
				t.Fatalf("step %d: peek %+v, then the hit %+v", i, pd, d)
			}
			if d.Allowed {
				loaded++
			}
			if fresh.Apply(&c, now).Allowed {
				empty++
			}
			snapshotAll(tb, now)
			tb.Expire(now, 0)
		}
		if loaded > empty {
			t.Fatalf("the loaded state allowed %d hits of 1, a key with no state %d", loaded, empty)
		}
	})
}

// chunked walks tb with SnapshotChunk, max entries a chunk, calling
// between before each chunk after the first, and returns the records
// given, with copies of their states.
func chunked(tb *table.Table, now int64, max int, between func()) []algo.Record {
	var (
		rs  []algo.Record
		cur algo.Cursor
	)
	for first := true; ; first = false {
		if !first && between != nil {
			between()
		}
		n := 0
		more := tb.SnapshotChunk(now, &cur, max, func(r algo.Record) bool {
			r.State = bytes.Clone(r.State)
			rs = append(rs, r)
			n++
			return true
		})
		if max > 0 && n > max {
			panic(fmt.Sprintf("a chunk of %d records, max %d", n, max))
		}
		if !more {
			return rs
		}
	}
}

// fillSnapTable returns a table of n keys under every policy of
// snapPolicies, hit at random times.
func fillSnapTable(r *rand.Rand, n int) *table.Table {
	tb := table.New(0)
	for _, p := range snapPolicies {
		for i := range n {
			c := algo.Check{Op: algo.OpHit, Algorithm: p.a, ID: fmt.Sprint("k", i), Period: p.period, Limit: p.limit, Burst: algo.Burst(p.limit, p.burst), N: 1 + r.Int64N(3)}
			tb.Apply(&c, snapEpoch-r.Int64N(int64(time.Second)))
		}
	}
	return tb
}

// A walk in chunks of any size gives what Snapshot gives, in the same
// order, when the table does not change between chunks; a walk that fn
// stops goes on after the record it stopped at.
func TestSnapshotChunk(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	tb := fillSnapTable(r, 50)
	want := snapshotAll(tb, snapEpoch)
	if len(want) < 150 {
		t.Fatalf("%d records", len(want))
	}
	for _, max := range []int{0, 1, 2, 7, 64, 1000} {
		got := chunked(tb, snapEpoch, max, nil)
		if len(got) != len(want) {
			t.Fatalf("chunks of %d: %d records, want %d", max, len(got), len(want))
		}
		for i := range got {
			if got[i].ID != want[i].ID || got[i].Algorithm != want[i].Algorithm || got[i].Death != want[i].Death || !bytes.Equal(got[i].State, want[i].State) {
				t.Fatalf("chunks of %d: record %d is %+v, want %+v", max, i, got[i], want[i])
			}
		}
	}
	var (
		cur  algo.Cursor
		seen []string
	)
	for tb.SnapshotChunk(snapEpoch, &cur, 0, func(r algo.Record) bool {
		seen = append(seen, fmt.Sprint(r.Algorithm, r.ID))
		return len(seen)%3 != 0 // stop at every third
	}) {
	}
	if len(seen) != len(want) {
		t.Fatalf("stopped by fn: %d records, want %d", len(seen), len(want))
	}
}

// The table changes between chunks (hits that move entries in the order,
// new keys, resets): every key left unchanged since the walk began is
// given exactly once, with its state.
func TestSnapshotChunkChanging(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 9))
		tb := fillSnapTable(r, 30)
		before := map[string]algo.Record{}
		for _, rec := range snapshotAll(tb, snapEpoch) {
			before[fmt.Sprint(rec.Algorithm, rec.Period, rec.ID)] = rec
		}
		changed := map[string]bool{}
		now := snapEpoch
		got := chunked(tb, snapEpoch, 1+r.IntN(20), func() {
			for range r.IntN(4) {
				p := snapPolicies[r.IntN(len(snapPolicies))]
				c := algo.Check{Op: algo.OpHit, Algorithm: p.a, ID: fmt.Sprint("k", r.IntN(40)), Period: p.period, Limit: p.limit, Burst: algo.Burst(p.limit, p.burst), N: 1}
				if r.IntN(5) == 0 {
					c.Op = algo.OpReset
				}
				now += int64(r.IntN(int(time.Millisecond)))
				tb.Apply(&c, now)
				changed[fmt.Sprint(c.Algorithm, c.Period, c.ID)] = true
			}
		})
		times := map[string]int{}
		for _, rec := range got {
			k := fmt.Sprint(rec.Algorithm, rec.Period, rec.ID)
			times[k]++
			if !changed[k] && !bytes.Equal(rec.State, before[k].State) {
				t.Fatalf("seed %d: unchanged %s given as %x, was %x", seed, k, rec.State, before[k].State)
			}
		}
		for k := range before {
			if !changed[k] && times[k] != 1 {
				t.Fatalf("seed %d: unchanged %s given %d times", seed, k, times[k])
			}
		}
	}
}
