package bench

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/actorlimit/actorlimit"
)

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// scalingProcs returns the GOMAXPROCS values of BenchmarkScaling: 1, 2 and
// all the cores, each once, none above all.
func scalingProcs() []int {
	all := runtime.NumCPU()
	var ps []int
	for _, p := range []int{1, 2, all} {
		if p <= all && !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	return ps
}

// scalingContenders are the implementations of BenchmarkScaling: actorlimit
// with one shard and with a shard per processor, and the peers whose cost
// the targets are stated against.
func scalingContenders(procs int) []contender {
	shards := func() (instance, error) {
		lim, err := actorlimit.Start(actorlimit.WithShards(procs))
		if err != nil {
			return instance{}, err
		}
		check := func(id string) (bool, error) {
			r, err := lim.CheckRate(id, periodMs, perHour)
			return r.Allowed, err
		}
		return singleInstance(check, func() { _ = lim.Close() }), nil
	}
	var cs []contender
	for _, c := range contenders {
		switch c.name {
		case "actorlimit":
			cs = append(cs, c, contender{"actorlimit-shards", shards})
		case "mutex-btree", "mutex-map", "x-time-rate", "go-limiter":
			cs = append(cs, c)
		}
	}
	return cs
}

// BenchmarkScaling measures how checks per second grow with the cores a
// process may use: BenchmarkScaling/impl=<name>/procs=<p>/callers=<c> sets
// GOMAXPROCS to p (1, 2 and all the cores) for the sub-benchmark and hits
// 10 000 keys from c goroutines as BenchmarkLimiters does, reporting
// "checks/s" (b.N over the elapsed time) beside ns/op. impl=actorlimit is
// one limiter actor (the default); impl=actorlimit-shards is WithShards(p).
// Every implementation is built and filled anew for each sub-benchmark,
// under its GOMAXPROCS, and the implementations take turns at each p, so
// that the ratios at one p are measured side by side.
func BenchmarkScaling(b *testing.B) {
	keys := keySet(10_000)
	for _, procs := range scalingProcs() {
		for _, c := range scalingContenders(procs) {
			for _, callers := range []int{2, 256} {
				name := fmt.Sprintf("impl=%s/procs=%d/callers=%d", c.name, procs, callers)
				b.Run(name, func(b *testing.B) {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
					inst, err := c.open()
					if err != nil {
						b.Fatal(err)
					}
					defer inst.close()
					fill(b, inst.newHitter(), keys)
					benchParallel(b, inst, keys, callers)
					if s := b.Elapsed().Seconds(); s > 0 {
						b.ReportMetric(float64(b.N)/s, "checks/s")
					}
				})
			}
		}
	}
}
