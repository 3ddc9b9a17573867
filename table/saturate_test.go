package table

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// satStep is one hit of a saturation sequence: n hits at offset at, and
// whether each family of algorithms allows them.
type satStep struct {
	at                          time.Duration
	n                           int64
	fixed, sliding, log, bucket bool
	// never says that, where denied, no wait would do (RetryAfter Never);
	// otherwise a denial's RetryAfter is positive and a peek after it
	// allows one hit.
	never bool
}

// allowedBy returns whether s expects a to allow it.
func (s satStep) allowedBy(a tableAlgo) bool {
	switch a.name {
	case "FixedWindow":
		return s.fixed
	case "SlidingWindow":
		return s.sliding
	case "SlidingLog":
		return s.log
	}
	return s.bucket
}

// TestSaturation drives every algorithm with hits of n = MaxInt64 after
// other hits, twice in a row, and under a Limit of MaxInt64, where counts,
// sums and TATs reach the top of an int64: no decision may wrap (negative
// Count or Remaining, a wrong Allowed), and the state after them must decide
// the next hits as it should.
func TestSaturation(t *testing.T) {
	const big = math.MaxInt64
	second := time.Second
	tests := []struct {
		name  string
		limit int64 // also the capacity
		steps []satStep
	}{
		{"MaxInt64 after other hits", 10, []satStep{
			{0, 1, true, true, true, true, false},
			{0, 2, true, true, true, true, false},
			{0, big, false, false, false, false, true},
			// The fixed window counts denied hits: its count is saturated.
			{0, 1, false, true, true, true, false},
			{2 * time.Minute, 1, true, true, true, true, false},
			{2 * time.Minute, big - 1, false, false, false, false, true},
			{2 * time.Minute, 9, false, true, true, true, false},
		}},
		{"MaxInt64 twice", 10, []satStep{
			{0, big, false, false, false, false, true},
			{0, big, false, false, false, false, true},
			{0, 1, false, true, true, true, false},
			{2 * time.Minute, 10, true, true, true, true, false},
		}},
		{"MaxInt64 twice under a limit of MaxInt64", big, []satStep{
			{0, big, true, true, true, true, false},
			{0, 1, false, false, false, false, false},
			{0, big, false, false, false, false, false},
			{0, big, false, false, false, false, false},
			{2 * time.Minute, 1, true, true, true, true, false},
			{2 * time.Minute, big - 1, true, true, true, true, false},
			{2 * time.Minute, 1, false, false, false, false, false},
		}},
		// The sliding window's next slot: a large count one slot after the
		// previous one.
		{"the rest of MaxInt64 one sub-window later", big, []satStep{
			{0, 1, true, true, true, true, false},
			{second, big - 1, true, true, true, true, false},
			{second, 1, false, false, false, true, false},
			{second, big, false, false, false, false, false},
			{2*time.Minute + second, 1, true, true, true, true, false},
		}},
		// The same for the log; then its first slot leaves the window,
		// and its second.
		{"the rest of MaxInt64 one millisecond later", big, []satStep{
			{0, 2, true, true, true, true, false},
			{time.Millisecond, big - 2, true, true, true, true, false},
			{time.Millisecond, 1, false, false, false, true, false},
			{time.Minute + time.Millisecond, 1, true, false, true, true, false},
			{time.Minute + 2*time.Millisecond, big - 1, true, false, true, true, false},
		}},
	}
	for _, a := range allAlgos {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("alg=%s/%s", a.name, tt.name), func(t *testing.T) {
				runSaturation(t, a, tt.limit, tt.steps)
			})
		}
	}
}

func runSaturation(t *testing.T, a tableAlgo, limit int64, steps []satStep) {
	t.Helper()
	tbl := New(0)
	k := Key{Kind: 1, Scale: int64(time.Minute), ID: "x"}
	start := int64(1_800_000_000) * sec // a whole minute
	burst := burstFor(a, limit)
	if a.name == "LeakyBucket" && limit == math.MaxInt64 {
		burst = limit // a queue of MaxInt64: the most the bucket holds
	}
	for i, s := range steps {
		now := start + int64(s.at)
		d := a.hit(tbl, k, limit, burst, s.n, now)
		if d.Allowed != s.allowedBy(a) {
			t.Fatalf("step %d (n %d at %v): %+v, want allowed %v", i, s.n, s.at, d, s.allowedBy(a))
		}
		checkSaturated(t, i, a, limit, d)
		switch {
		case d.Allowed:
		case s.never && d.RetryAfter != algo.Never:
			t.Fatalf("step %d: %+v, want RetryAfter Never", i, d)
		case !s.never && d.RetryAfter <= 0:
			t.Fatalf("step %d: %+v, want a positive RetryAfter", i, d)
		case !s.never && s.n == 1:
			if p := a.peek(tbl, k, limit, burst, now+int64(d.RetryAfter)); !p.Allowed {
				t.Fatalf("step %d: denied with %+v, yet a peek after RetryAfter is %+v", i, d, p)
			}
		}
		checkSaturated(t, i, a, limit, a.peek(tbl, k, limit, burst, now))
	}
	// Long after, the state is back to empty: one hit counts as one.
	now := start + int64(steps[len(steps)-1].at) + int64(10*time.Minute)
	if d := a.hit(tbl, k, limit, burst, 1, now); !d.Allowed || d.Count != 1 {
		t.Fatalf("ten minutes later: %+v, want allowed with Count 1", d)
	}
}

// checkSaturated fails on a decision that shows a wrapped number, for a
// limit whose capacity (the most hits its state holds) is capacity.
func checkSaturated(t *testing.T, step int, a tableAlgo, capacity int64, d algo.Decision) {
	t.Helper()
	switch {
	case d.Count < 0 || d.Remaining < 0 || d.Remaining > capacity:
		t.Fatalf("step %d: Count or Remaining out of range: %+v", step, d)
	case d.ResetAfter < 0 || d.Delay < 0 || d.RetryAfter < algo.Never:
		t.Fatalf("step %d: negative time: %+v", step, d)
	case d.Allowed && d.RetryAfter != 0:
		t.Fatalf("step %d: allowed with RetryAfter: %+v", step, d)
	case a.name != "FixedWindow" && d.Count > capacity:
		t.Fatalf("step %d: Count over the capacity: %+v", step, d)
	}
}

// TestAddSaturates checks Add's count at both ends of int64.
func TestAddSaturates(t *testing.T) {
	tests := []struct {
		adds []int64
		want int64
	}{
		{[]int64{math.MaxInt64, 1}, math.MaxInt64},
		{[]int64{1, math.MaxInt64}, math.MaxInt64},
		{[]int64{math.MaxInt64, math.MaxInt64, -1}, math.MaxInt64 - 1},
		{[]int64{math.MaxInt64 - 1, 1}, math.MaxInt64},
		{[]int64{math.MinInt64, -1}, math.MinInt64},
		{[]int64{-5, math.MaxInt64}, math.MaxInt64 - 5},
	}
	for _, tt := range tests {
		tb := New(0)
		var got Entry
		for _, n := range tt.adds {
			got = tb.Add(key(0, sec, "x"), 1, n, 0)
		}
		if got.Count != tt.want {
			t.Errorf("Add %v: Count %d, want %d", tt.adds, got.Count, tt.want)
		}
	}
}

// TestFixedWindowSaturatedPeek checks that a fixed window whose count is
// at the top of int64 reports it full, whatever the limit.
func TestFixedWindowSaturatedPeek(t *testing.T) {
	tb := New(0)
	k := key(0, sec, "x")
	for _, limit := range []int64{0, 10, math.MaxInt64} {
		tb.FixedWindow(k, limit, math.MaxInt64, 0)
		if p := tb.PeekFixedWindow(k, limit, 1); p.Allowed || p.Count != math.MaxInt64 || p.Remaining != 0 {
			t.Errorf("limit %d: peek %+v, want denied with Count MaxInt64", limit, p)
		}
		if d := tb.FixedWindow(k, limit, 1, 2); d.Allowed || d.Count != math.MaxInt64 {
			t.Errorf("limit %d: hit %+v, want denied with Count MaxInt64", limit, d)
		}
		tb.Delete(k)
	}
}

// TestBucketExtremes runs the bucket algorithms at the edges of what the
// root package accepts: Periods of 1 ns and MaxSpan, Limits and Bursts of 1
// and MaxInt64 (with drain times up to MaxSpan), and a Limit changed from
// MaxInt64 to 1 on a full bucket, whose backlog must clamp to MaxSpan, not
// wrap.
func TestBucketExtremes(t *testing.T) {
	const big, span = math.MaxInt64, int64(algo.MaxSpan)
	type hit struct {
		at           int64 // ns from the start
		limit, burst int64
		n            int64
		allowed      bool
	}
	tests := []struct {
		name   string
		period int64
		hits   []hit
	}{
		{"1 ns, MaxInt64 per period", 1, []hit{
			{0, big, big, big, true},
			{0, big, big, 1, false},
			{0, big, big, big, false},
			{1, big, big, big, true},
		}},
		{"MaxSpan, 1 per period", span, []hit{
			{0, 1, 1, 1, true},
			{0, 1, 1, big, false},
			{0, 1, 1, 1, false},
			{span, 1, 1, 1, true},
		}},
		{"MaxSpan, MaxInt64 per period", span, []hit{
			{0, big, big, big, true},
			{0, big, big, big, false},
			{span / 2, big, big, big / 2, true},
			{span / 2, big, big, 1, false},
		}},
		// MaxInt64 hits at 1 per MaxSpan would take far longer than
		// MaxSpan to drain: the backlog clamps to MaxSpan, a full bucket.
		{"Limit MaxInt64 to 1 on a full bucket", span, []hit{
			{0, big, big, big, true},
			{0, 1, 1, 1, false},
			{0, 1, 1, big, false},
			{span - 1, 1, 1, 1, false},
			{span, 1, 1, 1, true},
		}},
		{"burst of MaxSpan hits at 1 per ns", 1, []hit{
			{0, 1, span, span, true},
			{0, 1, span, big, false},
			{0, 1, span, 1, false},
			{1, 1, span, 1, true},
		}},
	}
	for _, a := range algos[2:] {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("alg=%s/%s", a.name, tt.name), func(t *testing.T) {
				tbl := New(0)
				k := Key{Kind: 1, Scale: tt.period, ID: "x"}
				start := int64(1_800_000_000) * sec
				for i, h := range tt.hits {
					burst := h.burst
					if a.name == "LeakyBucket" && burst < big {
						burst-- // the same capacity: burst waiting and one served
					}
					d := a.hit(tbl, k, h.limit, burst, h.n, start+h.at)
					if d.Allowed != h.allowed {
						t.Fatalf("step %d: %+v, want allowed %v", i, d, h.allowed)
					}
					checkSaturated(t, i, a, h.burst, d)
					if !d.Allowed && d.RetryAfter != algo.Never && (d.RetryAfter <= 0 || int64(d.RetryAfter) > 2*span) {
						t.Fatalf("step %d: RetryAfter out of range: %+v", i, d)
					}
				}
			})
		}
	}
}
