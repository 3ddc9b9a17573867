package table

import (
	"math"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

const ms = int64(time.Millisecond)

// fixedStep is one FixedWindow call, or one PeekFixedWindow call if peek is
// set (n is then unused), and the decision it must return.
type fixedStep struct {
	peek     bool
	k        Key
	limit, n int64
	now      int64 // Unix ns
	want     algo.Decision
}

func runFixed(t *testing.T, tb *Table, steps []fixedStep) {
	t.Helper()
	for i, s := range steps {
		if s.peek {
			before, hadEntry := tb.Get(s.k)
			n := tb.Len()
			if got := tb.PeekFixedWindow(s.k, s.limit, s.now); got != s.want {
				t.Fatalf("step %d: PeekFixedWindow(%+v, limit=%d, now=%d) = %+v, want %+v", i, s.k, s.limit, s.now, got, s.want)
			}
			if after, ok := tb.Get(s.k); after != before || ok != hadEntry || tb.Len() != n {
				t.Fatalf("step %d: PeekFixedWindow changed the table: entry %+v -> %+v, Len %d -> %d", i, before, after, n, tb.Len())
			}
			continue
		}
		got := tb.FixedWindow(s.k, s.limit, s.n, s.now)
		if got != s.want {
			t.Fatalf("step %d: FixedWindow(%+v, limit=%d, n=%d, now=%d) = %+v, want %+v", i, s.k, s.limit, s.n, s.now, got, s.want)
		}
		e, ok := tb.Get(s.k)
		if !ok || e.Count != got.Count || e.Modified != algo.FloorDiv(s.now, ms) || time.Duration(e.End()-s.now) != got.ResetAfter {
			t.Fatalf("step %d: after FixedWindow at %d, entry is %+v, %v; decision %+v", i, s.now, e, ok, got)
		}
	}
}

func TestFixedWindow(t *testing.T) {
	k := key(0, sec, "alice")
	k30 := key(0, 30_000*ms, "alice")
	// 1_700_000_010_000 ms is the start of bucket 56_666_667 of a 30 000 ms scale.
	epoch := 1_700_000_010_000 * ms
	t0 := 1_000 * sec // the start of a 1 s window
	ok := func(count, remaining int64, reset time.Duration) algo.Decision {
		return algo.Decision{Allowed: true, Count: count, Remaining: remaining, ResetAfter: reset}
	}
	deny := func(count int64, retry, reset time.Duration) algo.Decision {
		return algo.Decision{Count: count, RetryAfter: retry, ResetAfter: reset}
	}
	tests := []struct {
		name  string
		steps []fixedStep
	}{
		{"window edges of a 30 000 ms scale", []fixedStep{
			{k: k30, limit: 1, n: 1, now: epoch + 29_999*ms, want: ok(1, 0, time.Millisecond)},
			{k: k30, limit: 1, n: 1, now: epoch + 30_000*ms, want: ok(1, 0, 30*time.Second)},
			{k: k30, limit: 1, n: 1, now: epoch + 60_000*ms - 1, want: deny(2, 1, 1)},
			{k: k30, limit: 1, n: 1, now: epoch + 60_000*ms, want: ok(1, 0, 30*time.Second)},
		}},
		{"denied hits are counted", []fixedStep{
			{k: k, limit: 2, n: 1, now: t0 + 100*ms, want: ok(1, 1, 900*time.Millisecond)},
			{k: k, limit: 2, n: 1, now: t0 + 200*ms, want: ok(2, 0, 800*time.Millisecond)},
			{k: k, limit: 2, n: 1, now: t0 + 300*ms, want: deny(3, 700*time.Millisecond, 700*time.Millisecond)},
			{peek: true, k: k, limit: 2, now: t0 + 400*ms, want: deny(3, 600*time.Millisecond, 600*time.Millisecond)},
			{k: k, limit: 2, n: 1, now: t0 + sec - 1, want: deny(4, 1, 1)},
			{k: k, limit: 2, n: 1, now: t0 + sec, want: ok(1, 1, time.Second)},
			{peek: true, k: k, limit: 2, now: t0 + sec, want: ok(1, 1, time.Second)},
			{k: k, limit: 2, n: 2, now: t0 + sec, want: deny(3, time.Second, time.Second)},
		}},
		{"more than the limit can never go", []fixedStep{
			{k: k, limit: 3, n: 4, now: t0, want: deny(4, algo.Never, time.Second)},
			{k: k, limit: 3, n: 1, now: t0 + 250*ms, want: deny(5, 750*time.Millisecond, 750*time.Millisecond)},
			{peek: true, k: k, limit: 3, now: t0 + 500*ms, want: deny(5, 500*time.Millisecond, 500*time.Millisecond)},
			{k: k, limit: 3, n: 3, now: t0 + sec, want: ok(3, 0, time.Second)},
		}},
		{"limit 0 always denies", []fixedStep{
			{peek: true, k: k, limit: 0, now: t0, want: deny(0, algo.Never, 0)},
			{k: k, limit: 0, n: 1, now: t0, want: deny(1, algo.Never, time.Second)},
			{peek: true, k: k, limit: 0, now: t0 + 1, want: deny(1, algo.Never, time.Second-1)},
			{k: k, limit: 0, n: 1, now: t0 + 5*sec, want: deny(1, algo.Never, time.Second)},
		}},
		{"peek at a key with nothing counted", []fixedStep{
			{peek: true, k: k, limit: 5, now: t0 + 300*ms, want: ok(0, 5, 0)},
			{k: k, limit: 5, n: 2, now: t0 + 300*ms, want: ok(2, 3, 700*time.Millisecond)},
			{peek: true, k: k, limit: 5, now: t0 + 999*ms, want: ok(2, 3, time.Millisecond)},
			{peek: true, k: k, limit: 5, now: t0 + sec, want: ok(0, 5, 0)}, // its window is over
			{peek: true, k: key(0, sec5, "alice"), limit: 5, now: t0, want: ok(0, 5, 0)},
			{peek: true, k: key(1, sec, "alice"), limit: 5, now: t0, want: ok(0, 5, 0)},
		}},
		{"a clock stepped back counts into the newer window", []fixedStep{
			{k: k, limit: 2, n: 1, now: t0 + 1_500*ms, want: ok(1, 1, 500*time.Millisecond)},
			{peek: true, k: k, limit: 2, now: t0 + 500*ms, want: ok(1, 1, 1_500*time.Millisecond)},
			{k: k, limit: 2, n: 1, now: t0 + 500*ms, want: ok(2, 0, 1_500*time.Millisecond)},
			{k: k, limit: 2, n: 1, now: t0 + 600*ms, want: deny(3, 1_400*time.Millisecond, 1_400*time.Millisecond)},
		}},
		{"before 1970", []fixedStep{
			{k: k, limit: 1, n: 1, now: -1, want: ok(1, 0, 1)},
			{k: k, limit: 1, n: 1, now: -sec, want: deny(2, time.Second, time.Second)},
			{k: k, limit: 1, n: 1, now: 0, want: ok(1, 0, time.Second)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runFixed(t, New(0), tt.steps) })
	}
}

// TestFixedWindowEntry checks the row FixedWindow leaves: the bucket of now,
// created and modified in Unix milliseconds.
func TestFixedWindowEntry(t *testing.T) {
	k := key(0, 30_000*ms, "alice")
	epoch := 1_700_000_010_000 * ms
	tb := New(0)
	tb.FixedWindow(k, 10, 1, epoch+29_999*ms)
	tb.FixedWindow(k, 10, 1, epoch+30_000*ms+999_999) // just short of the next ms
	tb.FixedWindow(k, 10, 1, epoch+31_000*ms)
	want := Entry{Key: k, Bucket: 56_666_668, Count: 2, Created: 1_700_000_040_000, Modified: 1_700_000_041_000}
	if got, ok := tb.Get(k); !ok || got != want {
		t.Fatalf("entry = %+v, %v, want %+v", got, ok, want)
	}
	// A clock stepped back to before 1970: the hit counts into the newer
	// window, and -1 ns is -1 ms, not 0.
	tb.FixedWindow(k, 10, 1, -1)
	want.Count, want.Modified = 3, -1
	if got, ok := tb.Get(k); !ok || got != want {
		t.Fatalf("entry = %+v, %v, want %+v", got, ok, want)
	}
}

func TestFloorDiv(t *testing.T) {
	tests := []struct{ a, b, want int64 }{
		{7, 2, 3}, {6, 2, 3}, {0, 5, 0}, {-7, 2, -4}, {-8, 2, -4}, {-1, 2, -1},
		{-1, 30_000, -1}, {-30_000, 30_000, -1}, {-30_001, 30_000, -2}, {29_999, 30_000, 0},
		{math.MinInt64, 1, math.MinInt64}, {math.MinInt64, math.MaxInt64, -2},
		{math.MaxInt64, math.MaxInt64, 1}, {-1, math.MaxInt64, -1},
		{-1, sec, -1}, {-sec, sec, -1}, {-sec - 1, sec, -2},
	}
	for _, tt := range tests {
		if got := algo.FloorDiv(tt.a, tt.b); got != tt.want {
			t.Errorf("FloorDiv(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
