package algo_test

import (
	"testing"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

func TestChargeBucketGoesIntoDebt(t *testing.T) {
	const (
		period = int64(time.Second)
		limit  = 10
		burst  = 10
		now    = int64(1_000_000) * period
	)
	var s algo.BucketState
	algo.ChargeBucket(&s, period, limit, burst, 15, now) // 15 hits, capacity 10: 5 in debt
	d := algo.GCRAPeek(s, period, limit, burst, now)
	if d.Allowed || d.Count != 15 {
		t.Fatalf("after charging 15 of capacity 10: %+v, want denied with count 15", d)
	}
	// 0.5 s of debt, then room for one more 0.1 s later.
	if want := 600 * time.Millisecond; d.RetryAfter != want {
		t.Fatalf("RetryAfter %v, want %v", d.RetryAfter, want)
	}
	if d := algo.GCRAPeek(s, period, limit, burst, now+int64(600*time.Millisecond)); !d.Allowed {
		t.Fatalf("after the debt drained: %+v, want allowed", d)
	}
	// Charging is what an allowed hit does to the state.
	var a, b algo.BucketState
	for i := range int64(7) {
		at := now + i*int64(30*time.Millisecond)
		if d, _ := algo.TokenBucketHit(&a, period, limit, burst, 1, at); !d.Allowed {
			t.Fatalf("hit %d denied", i)
		}
		algo.ChargeBucket(&b, period, limit, burst, 1, at)
	}
	if a != b {
		t.Fatalf("charged %+v, hit %+v", b, a)
	}
}

// TestChargeBucketDebtBounded: however much is charged, a bucket holds at
// most one capacity of debt, so it is full again after capacity*T and
// allows a hit T later.
func TestChargeBucketDebtBounded(t *testing.T) {
	const (
		period = int64(time.Second)
		now    = int64(1_000_000) * period
	)
	for _, tc := range []struct {
		name                  string
		limit, capacity, n    int64
		wantCount             int64
		wantRetry, wantResets time.Duration
	}{
		{"25 into 10", 10, 10, 25, 20, 1100 * time.Millisecond, 2 * time.Second},
		{"huge", 1, 2, 1 << 62, 4, 3 * time.Second, 4 * time.Second},
		{"past MaxSpan", 1, 1 << 62, 1 << 62, 1 << 62, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s algo.BucketState
			algo.ChargeBucket(&s, period, tc.limit, tc.capacity, tc.n, now)
			if tc.wantRetry < 0 { // the bound is MaxSpan: saturated, not wrapped
				if got := s.Death() - now; got != int64(algo.MaxSpan) {
					t.Fatalf("death in %v, want MaxSpan", time.Duration(got))
				}
				return
			}
			d := algo.GCRAPeek(s, period, tc.limit, tc.capacity, now)
			if d.Allowed || d.Count != tc.wantCount || d.RetryAfter != tc.wantRetry || d.ResetAfter != tc.wantResets {
				t.Fatalf("got %+v, want denied, count %d, retry %v, reset %v", d, tc.wantCount, tc.wantRetry, tc.wantResets)
			}
			// Charging more changes nothing: the debt is at its bound.
			c := s
			algo.ChargeBucket(&c, period, tc.limit, tc.capacity, 1, now)
			if c != s {
				t.Fatalf("charge at the bound: %+v, was %+v", c, s)
			}
		})
	}
}

func TestChargeSlotsPastLimit(t *testing.T) {
	const period = int64(time.Second)
	now := int64(1_000_000) * period
	for _, tc := range []struct {
		name   string
		charge func(*algo.SlotState, int64, int64, int64)
		peek   func(algo.SlotState, int64, int64, int64) algo.Decision
		hit    func(*algo.SlotState, int64, int64, int64, int64) (algo.Decision, bool)
	}{
		{"sliding window", algo.ChargeSlidingWindow, algo.SlidingWindowPeek, algo.SlidingWindowHit},
		{"sliding log", algo.ChargeSlidingLog, algo.SlidingLogPeek, algo.SlidingLogHit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s algo.SlotState
			tc.charge(&s, period, 30, now)
			tc.charge(&s, period, 1<<63-1, now) // saturates
			if d := tc.peek(s, period, 10, now); d.Allowed || d.Count != 1<<63-1 {
				t.Fatalf("after charging past the limit: %+v", d)
			}
			if d := tc.peek(s, period, 10, now+2*period); !d.Allowed || d.Count != 0 {
				t.Fatalf("two periods later: %+v, want empty", d)
			}
			var a, b algo.SlotState
			for i := range int64(5) {
				at := now + i*int64(170*time.Millisecond)
				tc.hit(&a, period, 100, 2, at)
				tc.charge(&b, period, 2, at)
			}
			if da, db := tc.peek(a, period, 100, now+period), tc.peek(b, period, 100, now+period); da != db {
				t.Fatalf("charged %+v, hit %+v", db, da)
			}
		})
	}
}

// TestBucketPolicyLowered: a key that held many hits under a generous
// policy, read under a much lower one, holds at most the new capacity: the
// client waits at most what the new policy allows from a full bucket.
func TestBucketPolicyLowered(t *testing.T) {
	const now = int64(1_000_000) * int64(time.Second)
	type bucket struct {
		name string
		hit  func(s *algo.BucketState, period, limit, burst, n, now int64) (algo.Decision, bool)
		peek func(s algo.BucketState, period, limit, burst, now int64) algo.Decision
		cap  int64 // of the lowered policy: burst 2
	}
	for _, b := range []bucket{
		{"GCRA", algo.GCRAHit, algo.GCRAPeek, 2},
		{"TokenBucket", algo.TokenBucketHit, algo.TokenBucketPeek, 2},
		{"LeakyBucket", algo.LeakyBucketHit, algo.LeakyBucketPeek, 3},
	} {
		t.Run(b.name, func(t *testing.T) {
			var s algo.BucketState
			sec := int64(time.Second)
			// 1 000 000 per second, a full bucket: a million hits held.
			if d, _ := b.hit(&s, sec, 1_000_000, 1_000_000, 1_000_000, now); !d.Allowed {
				t.Fatalf("filling: %+v", d)
			}
			hour := int64(time.Hour)
			d := b.peek(s, hour, 1, 2, now)
			if d.Count != b.cap || d.Allowed || d.RetryAfter != time.Hour {
				t.Fatalf("under 1 per hour, burst 2: %+v, want count %d, denied, retry 1h", d, b.cap)
			}
			before := s
			d, changed := b.hit(&s, hour, 1, 2, 1, now)
			if d.Allowed || !changed || d.RetryAfter != time.Hour {
				t.Fatalf("hit under the lowered policy: %+v changed %v", d, changed)
			}
			if s == before {
				t.Fatal("the state was not rewritten at the new capacity")
			}
			if d := b.peek(s, hour, 1, 2, now+hour); !d.Allowed {
				t.Fatalf("an hour later: %+v, want allowed", d)
			}
		})
	}
}
