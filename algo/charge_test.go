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
	algo.ChargeBucket(&s, period, limit, 25, now) // 25 hits, capacity 10: 15 in debt
	d := algo.GCRAPeek(s, period, limit, burst, now)
	if d.Allowed || d.Count != 25 {
		t.Fatalf("after charging 25 of capacity 10: %+v, want denied with count 25", d)
	}
	// 1.5 s of debt, then room for one more 0.1 s later.
	if want := time.Duration(1.6 * float64(time.Second)); d.RetryAfter != want {
		t.Fatalf("RetryAfter %v, want %v", d.RetryAfter, want)
	}
	if d := algo.GCRAPeek(s, period, limit, burst, now+int64(1600*time.Millisecond)); !d.Allowed {
		t.Fatalf("after the debt drained: %+v, want allowed", d)
	}
	// Charging is what an allowed hit does to the state.
	var a, b algo.BucketState
	for i := range int64(7) {
		at := now + i*int64(30*time.Millisecond)
		if d, _ := algo.TokenBucketHit(&a, period, limit, burst, 1, at); !d.Allowed {
			t.Fatalf("hit %d denied", i)
		}
		algo.ChargeBucket(&b, period, limit, 1, at)
	}
	if a != b {
		t.Fatalf("charged %+v, hit %+v", b, a)
	}
	// A huge charge saturates at MaxSpan instead of overflowing.
	algo.ChargeBucket(&s, period, 1, 1<<62, now)
	if got := s.Death() - now; got != int64(algo.MaxSpan) {
		t.Fatalf("saturated charge: death in %v, want MaxSpan", time.Duration(got))
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
