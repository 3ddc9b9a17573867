//go:build !race

package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

// benchIDs are the ids the check benchmarks cycle through.
func benchIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("10.0.%d.%d", i/256, i%256)
	}
	return ids
}

// BenchmarkCheck compares a LocalFirst member's check with the
// single-process limiter's CheckRate, in one run. Allocations are counted
// process-wide: with sync=50ms they include the sync's.
func BenchmarkCheck(b *testing.B) {
	ids := benchIDs(10000)
	require.NotEmpty(b, ids)
	single, err := actorlimit.Start(actorlimit.WithJanitor(0, 0))
	require.NoError(b, err)
	b.Cleanup(func() { _ = single.Close() })
	// The check alone: a clock whose ticker never ticks, so no sync runs.
	quiet, _ := startMembersWith(b, 1, cluster.Config{Clock: wallNoTicks{}})
	// With the sync every 50 ms on the wall clock, competing for the CPUs.
	syncing, _ := startMembersWith(b, 1, cluster.Config{})
	for _, impl := range []struct {
		name string
		lim  *actorlimit.Limiter
	}{{"single", single}, {"localfirst/sync=none", quiet[0].Limiter}, {"localfirst/sync=50ms", syncing[0].Limiter}} {
		b.Run("impl="+impl.name+"/callers=1", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := impl.lim.CheckRate(ids[i%len(ids)], 60000, 1<<40); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run("impl="+impl.name+"/callers=parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := impl.lim.CheckRate(ids[i%len(ids)], 60000, 1<<40); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}

// BenchmarkOwnerRoundTrip measures an Owner-mode check whose partition this
// member owns (owner=local) and one another member owns (owner=remote), with
// p50 and p99 latencies.
func BenchmarkOwnerRoundTrip(b *testing.B) {
	members, _ := startMembersWith(b, 2, cluster.Config{Mode: cluster.Owner})
	m := members[0]
	var local, remote []string
	for _, id := range benchIDs(2000) {
		switch m.OwnerOf(id) {
		case m.Address():
			local = append(local, id)
		case members[1].Address():
			remote = append(remote, id)
		}
	}
	require.NotEmpty(b, local)
	require.NotEmpty(b, remote)
	p := actorlimit.Policy{Limit: 1 << 40, Period: time.Minute}
	for _, c := range []struct {
		name string
		ids  []string
	}{{"local", local}, {"remote", remote}} {
		b.Run("owner="+c.name, func(b *testing.B) {
			b.ReportAllocs()
			lat := make([]time.Duration, 0, 1<<16)
			i := 0
			for b.Loop() {
				start := time.Now()
				if _, err := m.Limiter.Hit(context.Background(), c.ids[i%len(c.ids)], p); err != nil {
					b.Fatal(err)
				}
				if len(lat) < cap(lat) {
					lat = append(lat, time.Since(start))
				}
				i++
			}
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			}
		})
	}
	// Many callers at once through the other member: each request goes in
	// a gRPC message of its own (see MaxReceiveBytes).
	b.Run("owner=remote/callers=64", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(64)
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := m.Limiter.Hit(context.Background(), remote[int(n.Add(1))%len(remote)], p); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// wallNoTicks is the wall clock with tickers that never tick.
type wallNoTicks struct{}

func (wallNoTicks) Now() time.Time { return time.Now() }

func (wallNoTicks) NewTicker(d time.Duration) actorlimit.Ticker {
	return testkit.NewClock(time.Time{}).HoldTickers().NewTicker(d) // no one calls its Tick
}

// BenchmarkCheckGCRA compares a LocalFirst GCRA hit with the
// single-process limiter's, in one run: on the owner's state, when the
// member owns the key's partition (owned), and on the member's copy of it
// (copy: a member that owns nothing, with no sync running).
func BenchmarkCheckGCRA(b *testing.B) {
	ids := benchIDs(10000)
	p := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 1 << 30, Period: time.Minute, Burst: 1 << 30}
	single, err := actorlimit.Start(actorlimit.WithJanitor(0, 0))
	require.NoError(b, err)
	b.Cleanup(func() { _ = single.Close() })
	owned, _ := startMembersWith(b, 1, cluster.Config{Clock: wallNoTicks{}})
	copies, err := cluster.Detached(cluster.Config{Clock: wallNoTicks{}}, "node-0", func(int, any) (any, error) {
		return nil, fmt.Errorf("no owner")
	})
	require.NoError(b, err)
	b.Cleanup(func() { _ = copies.Close() })
	for _, impl := range []struct {
		name string
		lim  *actorlimit.Limiter
	}{{"single", single}, {"localfirst/owned", owned[0].Limiter}, {"localfirst/copy", copies.Limiter}} {
		b.Run("impl="+impl.name+"/callers=1", func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			i := 0
			for b.Loop() {
				if _, err := impl.lim.Hit(ctx, ids[i%len(ids)], p); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run("impl="+impl.name+"/callers=parallel", func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := impl.lim.Hit(ctx, ids[i%len(ids)], p); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}
