package table

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// A Table is not safe for concurrent use (one actor owns it), so these
// benchmarks have no b.RunParallel variants.

// benchKeys returns n distinct keys of one window length.
func benchKeys(b *testing.B, n int, scale int64) []Key {
	b.Helper()
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = Key{Scale: scale, ID: "client-" + strconv.Itoa(i)}
	}
	if len(keys) == 0 {
		b.Fatal("empty key set")
	}
	return keys
}

// fill adds one hit for every key in bucket, at the bucket's start, in a
// shuffled order, and checks they are all there. The shuffle keeps the table's entries from lying in
// memory in the order the benchmark walks the keys (which would let the CPU
// prefetch them), while the caller's own id strings stay in that order, as
// a caller's hot buffer would.
func fill(b *testing.B, tb *Table, keys []Key, bucket int64) {
	b.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	for _, i := range r.Perm(len(keys)) {
		tb.Add(keys[i], bucket, 1, bucket*keys[i].Scale/int64(time.Millisecond))
	}
	if tb.Len() < len(keys) {
		b.Fatalf("Len() = %d after adding %d keys", tb.Len(), len(keys))
	}
}

// BenchmarkAdd measures the increment path: every key has its entry in the
// current window.
func BenchmarkAdd(b *testing.B) {
	for _, n := range []int{1, 10_000, 100_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			const bucket, now = 1_000_000, 1_000_000_000
			keys := benchKeys(b, n, sec)
			tb := New(0)
			fill(b, tb, keys, bucket)
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				tb.Add(keys[i], bucket, 1, now)
				if i++; i == len(keys) {
					i = 0
				}
			}
		})
	}
}

// BenchmarkAddNewWindow measures the re-key path: every call moves an entry
// to the next window (one tree delete and one insert).
func BenchmarkAddNewWindow(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			keys := benchKeys(b, n, sec)
			tb := New(0)
			fill(b, tb, keys, 0)
			b.ReportAllocs()
			b.ResetTimer()
			i, bucket := 0, int64(1)
			for b.Loop() {
				tb.Add(keys[i], bucket, 1, bucket*1_000)
				if i++; i == len(keys) {
					i, bucket = 0, bucket+1
				}
			}
		})
	}
}

func BenchmarkFixedWindow(b *testing.B) {
	for _, n := range []int{100_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			const now = 1_700_000_000_000_000_000 // inside one 1 s window throughout
			keys := benchKeys(b, n, sec)
			tb := New(0)
			fill(b, tb, keys, now/sec)
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				tb.FixedWindow(keys[i], 1<<40, 1, now)
				if i++; i == len(keys) {
					i = 0
				}
			}
		})
	}
}

// largeSets returns the sizes small and large, or small alone with -short,
// which CI's run of every benchmark once passes so that none takes long to
// set up.
func largeSets(small, large int) []int {
	if testing.Short() {
		return []int{small}
	}
	return []int{small, large}
}

// BenchmarkExpire deletes dead entries from a table where live entries of the
// same window length stay: its cost should follow dead, not live.
// The million live entries are left out with -short (CI's run of every
// benchmark once).
func BenchmarkExpire(b *testing.B) {
	for _, live := range largeSets(10_000, 1_000_000) {
		for _, dead := range []int{1_000, 10_000} {
			b.Run(fmt.Sprintf("live=%d/dead=%d", live, dead), func(b *testing.B) {
				const bucket = 1_000_000 // the live window; the dead ones are older
				tb := New(0)
				fill(b, tb, benchKeys(b, live, sec), bucket)
				deadKeys := make([]Key, dead)
				for i := range deadKeys {
					deadKeys[i] = Key{Scale: sec, ID: "dead-" + strconv.Itoa(i)}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					b.StopTimer()
					for i, k := range deadKeys {
						tb.Add(k, bucket-1-int64(i%10), 1, 0)
					}
					b.StartTimer()
					if removed, _ := tb.Expire(bucket*sec, 0); removed != dead {
						b.Fatalf("Expire removed %d, want %d", removed, dead)
					}
				}
				if tb.Len() != live {
					b.Fatalf("Len() = %d, want %d live", tb.Len(), live)
				}
			})
		}
	}
}

// BenchmarkDecideBatch measures a batch of 64 fixed-window hits through
// [Table.Decide], as the limiter's actor sends them, on keys that all have
// an entry in the current window, walked in another order than the one
// they were added in. ns/op is per hit.
// The million keys are left out with -short.
func BenchmarkDecideBatch(b *testing.B) {
	for _, n := range largeSets(10_000, 1_000_000) {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			const now = 1_700_000_000_000_000_000
			keys := benchKeys(b, n, int64(time.Hour))
			tb := New(0)
			fill(b, tb, keys, now/int64(time.Hour))
			checks := make([]algo.Check, 64)
			out := make([]algo.Decision, len(checks))
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				for j := range checks {
					checks[j] = algo.Check{Algorithm: algo.FixedWindow, Period: time.Hour, Limit: 1 << 40, N: 1, ID: keys[i].ID}
					if i++; i == len(keys) {
						i = 0
					}
				}
				if err := tb.Decide(ctx, now, checks, out); err != nil || !out[0].Allowed {
					b.Fatal(err, out[0])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(checks)), "ns/hit")
		})
	}
}
