package table_test

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/table"
)

// snapStart is a Unix time that is a whole number of every period below.
const snapStart = int64(1_700_000_040_000) * int64(time.Millisecond)

// snapPolicy is one algorithm's policy in the round-trip tests.
type snapPolicy struct {
	a            algo.Algorithm
	limit, burst int64
	period       time.Duration
}

var snapPolicies = []snapPolicy{
	{algo.FixedWindow, 5, 0, time.Second},
	{algo.SlidingWindow, 7, 0, time.Second},
	{algo.GCRA, 3, 4, time.Second},
	{algo.TokenBucket, 6, 8, 1500 * time.Millisecond},
	{algo.LeakyBucket, 4, 2, time.Second},
	{algo.SlidingLog, 9, 0, 2 * time.Second},
}

func (p snapPolicy) check(op algo.Op, id string, n int64) algo.Check {
	return algo.Check{Op: op, Algorithm: p.a, Period: p.period, Limit: p.limit, Burst: p.burst, ID: id, N: n}
}

// copyTable loads every record of src's snapshot at now into a new table.
func copyTable(t *testing.T, src *table.Table, now int64) *table.Table {
	t.Helper()
	dst := table.New(0)
	src.Snapshot(now, func(r algo.Record) bool {
		if err := dst.Load(now, r); err != nil {
			t.Fatalf("Load %q: %v", r.ID, err)
		}
		return true
	})
	return dst
}

// TestSnapshotRoundTrip drives each algorithm at random, copies the table
// through its records at random moments and checks that the copy decides
// every later check as the original does.
func TestSnapshotRoundTrip(t *testing.T) {
	for _, p := range snapPolicies {
		t.Run(p.a.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(p.a), 7))
			orig, now := table.New(0), snapStart
			ids := []string{"a", "b", "c"}
			var cp *table.Table
			for step := range 400 {
				now += rng.Int64N(int64(p.period) / 5)
				if step%37 == 0 {
					cp = copyTable(t, orig, now)
				}
				c := p.check(algo.OpHit, ids[rng.IntN(len(ids))], 1+rng.Int64N(2))
				if rng.IntN(10) == 0 {
					c.Op = algo.OpPeek
				}
				want := orig.Apply(&c, now)
				if cp == nil {
					continue
				}
				if got := cp.Apply(&c, now); got != want {
					t.Fatalf("step %d: %v of %q at +%v: copy %+v, original %+v", step, c.Op, c.ID, time.Duration(now-snapStart), got, want)
				}
			}
		})
	}
}

// TestRecordIsSnapshot checks that Record gives what Snapshot gives for the
// same key, nil State for a key without state, and that loading a nil
// State deletes the key.
func TestRecordIsSnapshot(t *testing.T) {
	for _, p := range snapPolicies {
		t.Run(p.a.String(), func(t *testing.T) {
			tb := table.New(0)
			c := p.check(algo.OpHit, "k", 1)
			tb.Apply(&c, snapStart)
			tb.Apply(&c, snapStart+int64(time.Millisecond))
			r := tb.Record(&c)
			if r.State == nil || r.Death <= snapStart {
				t.Fatalf("Record = %+v: want state alive after now", r)
			}
			n := 0
			tb.Snapshot(snapStart, func(s algo.Record) bool {
				n++
				if s.ID != r.ID || s.Algorithm != r.Algorithm || s.Period != r.Period || s.Death != r.Death || !bytes.Equal(s.State, r.State) {
					t.Errorf("Snapshot %+v, Record %+v", s, r)
				}
				return true
			})
			if n != 1 {
				t.Fatalf("Snapshot gave %d records, want 1", n)
			}
			other := p.check(algo.OpHit, "none", 1)
			if r := tb.Record(&other); r.State != nil || r.ID != "none" {
				t.Fatalf("Record of a key without state = %+v", r)
			}
			if err := tb.Load(snapStart, algo.Record{Algorithm: p.a, Period: p.period, ID: "k"}); err != nil {
				t.Fatal(err)
			}
			if tb.Len() != 0 {
				t.Fatalf("Len after loading nil State = %d, want 0", tb.Len())
			}
		})
	}
}

// TestLoadSkipsDead checks that records dead at the loading time are not
// loaded, and that Snapshot leaves them out.
func TestLoadSkipsDead(t *testing.T) {
	for _, p := range snapPolicies {
		t.Run(p.a.String(), func(t *testing.T) {
			tb := table.New(0)
			c := p.check(algo.OpHit, "k", 1)
			tb.Apply(&c, snapStart)
			r := tb.Record(&c)
			dst := table.New(0)
			if err := dst.Load(r.Death, r); err != nil || dst.Len() != 0 {
				t.Fatalf("Load at death: err %v, Len %d; want nil, 0", err, dst.Len())
			}
			tb.Snapshot(r.Death, func(s algo.Record) bool {
				t.Errorf("Snapshot at death gave %+v", s)
				return true
			})
		})
	}
}

// TestLoadRejectsBadState checks that Load refuses records that do not
// decode, and that a refused record changes nothing.
func TestLoadRejectsBadState(t *testing.T) {
	for _, p := range snapPolicies {
		t.Run(p.a.String(), func(t *testing.T) {
			tb := table.New(0)
			c := p.check(algo.OpHit, "k", 2)
			tb.Apply(&c, snapStart)
			good := tb.Record(&c)
			good.State = bytes.Clone(good.State) // Record reuses its buffer
			bad := map[string][]byte{
				"empty":     {},
				"version":   append([]byte{99}, good.State[1:]...),
				"truncated": good.State[:len(good.State)-1],
				"trailing":  append(append([]byte(nil), good.State...), 0),
			}
			for name, st := range bad {
				before := tb.Record(&c)
				before.State = bytes.Clone(before.State)
				r := good
				r.State = st
				if err := tb.Load(snapStart, r); err == nil {
					t.Errorf("%s: Load accepted %x", name, st)
				}
				if after := tb.Record(&c); !bytes.Equal(after.State, before.State) {
					t.Errorf("%s: a refused record changed the state", name)
				}
			}
			r := good
			r.Algorithm = algo.Algorithm(200)
			if err := tb.Load(snapStart, r); err == nil {
				t.Error("Load accepted an unknown algorithm")
			}
		})
	}
}

// FuzzLoad checks that no record, however mangled, makes Load or a later
// check panic.
func FuzzLoad(f *testing.F) {
	for _, p := range snapPolicies {
		tb := table.New(0)
		c := p.check(algo.OpHit, "k", 3)
		tb.Apply(&c, snapStart)
		f.Add(uint8(p.a), tb.Record(&c).State)
	}
	f.Fuzz(func(t *testing.T, a uint8, state []byte) {
		p := snapPolicies[int(a)%len(snapPolicies)]
		tb := table.New(0)
		r := algo.Record{Algorithm: p.a, Period: p.period, ID: "k", Death: snapStart + 1, State: state}
		if err := tb.Load(snapStart, r); err != nil {
			return
		}
		for i := range int64(5) {
			c := p.check(algo.OpHit, "k", 1)
			tb.Apply(&c, snapStart+i*int64(p.period)/3)
			tb.Expire(snapStart+i*int64(p.period), 0)
		}
	})
}
