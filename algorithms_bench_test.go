package actorlimit_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

const benchKeys = 10_000

// benchIDs returns n distinct ids.
func benchIDs(b *testing.B, n int) []string {
	b.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("user-%06d", i)
	}
	if len(ids) == 0 {
		b.Fatal("no keys")
	}
	return ids
}

// benchPolicy is the policy the Hit benchmarks use: 100 hits per second.
func benchPolicy(alg actorlimit.Algorithm) actorlimit.Policy {
	return actorlimit.Policy{Algorithm: alg, Limit: 100, Period: time.Second}
}

// filledLimiter starts a limiter, closed when b ends, with every key of the
// benchmark's set hit once under alg's policy.
func filledLimiter(b *testing.B, alg actorlimit.Algorithm) (*actorlimit.Limiter, []string, actorlimit.Policy) {
	b.Helper()
	lim, err := actorlimit.Start(actorlimit.WithJanitor(0, 0))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = lim.Close() })
	ids, p := benchIDs(b, benchKeys), benchPolicy(alg)
	for _, id := range ids {
		if _, err := lim.Hit(context.Background(), id, p); err != nil {
			b.Fatal(err)
		}
	}
	return lim, ids, p
}

// BenchmarkHit measures one Hit through the limiter's mailbox, on the wall
// clock, with every key of the set in the table first.
func BenchmarkHit(b *testing.B) {
	ctx := context.Background()
	for _, alg := range allAlgorithms {
		b.Run(fmt.Sprintf("alg=%v/keys=%d", alg, benchKeys), func(b *testing.B) {
			lim, ids, p := filledLimiter(b, alg)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := lim.Hit(ctx, ids[i%len(ids)], p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHitParallel is BenchmarkHit with GOMAXPROCS callers.
func BenchmarkHitParallel(b *testing.B) {
	ctx := context.Background()
	for _, alg := range allAlgorithms {
		b.Run(fmt.Sprintf("alg=%v/keys=%d/callers=%d", alg, benchKeys, runtime.GOMAXPROCS(0)), func(b *testing.B) {
			lim, ids, p := filledLimiter(b, alg)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := lim.Hit(ctx, ids[i%len(ids)], p); err != nil {
						b.Error(err)
						return
					}
					i += 7919 // a prime: callers spread over the keys
				}
			})
		})
	}
}

// BenchmarkMemory measures the heap each key costs, for each algorithm, under
// the Figma article's load: 500 hits a day per key, evenly spread, for
// 10 000 keys, with a limit of 500 per day (so every hit is allowed and the
// sliding log holds 500 timestamps a key). It reports heap in use after
// runtime.GC, less what the idle limiter used, divided by the keys: B/key.
// With -short (CI's run of every benchmark once), a tenth of the keys.
func BenchmarkMemory(b *testing.B) {
	const hitsPerDay = 500
	ctx := context.Background()
	keys := benchKeys
	if testing.Short() {
		keys = benchKeys / 10
	}
	for _, alg := range allAlgorithms {
		b.Run(fmt.Sprintf("alg=%v/keys=%d", alg, keys), func(b *testing.B) {
			ids := benchIDs(b, keys)
			p := actorlimit.Policy{Algorithm: alg, Limit: hitsPerDay, Period: 24 * time.Hour}
			hits := make([]actorlimit.HitRequest, len(ids))
			for i, id := range ids {
				hits[i] = actorlimit.HitRequest{ID: id, Policy: p}
			}
			results := make([]actorlimit.Result, len(hits))
			b.ReportAllocs()
			var perKey float64
			for b.Loop() {
				clock := testkit.NewClock(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
				lim, err := actorlimit.Start(actorlimit.WithClock(clock), actorlimit.WithJanitor(0, 0))
				if err != nil {
					b.Fatal(err)
				}
				before := heapInUse()
				for range hitsPerDay {
					if err := lim.HitMany(ctx, hits, results); err != nil {
						b.Fatal(err)
					}
					if !results[len(results)-1].Allowed {
						b.Fatal("denied: the load must stay under the limit")
					}
					clock.Advance(24 * time.Hour / hitsPerDay)
				}
				perKey = float64(heapInUse()-before) / float64(len(ids))
				runtime.KeepAlive(hits)
				lim.Close()
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}

func heapInUse() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}
