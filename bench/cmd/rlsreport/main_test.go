package main

import (
	"strings"
	"testing"
)

func TestParseName(t *testing.T) {
	tests := []struct {
		name  string
		want  key
		round int
		ok    bool
	}{
		{"BenchmarkRLS/descriptors=1/clients=16/impl=floor-2", key{1, 16, "floor"}, 0, true},
		{"BenchmarkRLS/descriptors=1/clients=16/impl=floor", key{1, 16, "floor"}, 0, true},
		{"BenchmarkRLS/descriptors=3/clients=64/impl=floor-codec#01-2", key{3, 64, "floor-codec"}, 1, true},
		{"BenchmarkRLS/descriptors=3/clients=64/impl=actorlimitd-redis#12-8", key{3, 64, "actorlimitd-redis"}, 12, true},
		{"BenchmarkRLS/descriptors=1/clients=1/impl=envoy-ratelimit#03", key{1, 1, "envoy-ratelimit"}, 3, true},
		{"BenchmarkRLSFlood/impl=actorlimitd-redis-2", key{}, 0, false},
		{"BenchmarkRLS/descriptors=1/clients=16-2", key{}, 0, false},
		{"BenchmarkTracing/impl=floor-2", key{}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, round, ok := parseName(tt.name)
			if k != tt.want || round != tt.round || ok != tt.ok {
				t.Errorf("parseName = %+v, %d, %v; want %+v, %d, %v", k, round, ok, tt.want, tt.round, tt.ok)
			}
		})
	}
}

// roundsOutput is three rounds of two impls on a machine whose speed
// drifts from round to round: the pooled medians, taken apart, give
// 16000 / 14000 = 1.14x, the rounds' own ratios are 1.6x, 1.2x and 1.1x,
// whose median is 1.2x: the target (1.15x) is met within rounds, not
// by the pooled medians.
const roundsOutput = `# machine
goos: linux
BenchmarkRLS/descriptors=1/clients=16/impl=floor-2         	   20000	     50000 ns/op	     10000 req/s	  500.0 p50-µs	  4000 p99-µs	  50.00 server-cpu-µs/req	 100 B/op	 2 allocs/op
BenchmarkRLS/descriptors=1/clients=16/impl=actorlimitd-2   	   20000	     50000 ns/op	     16000 req/s	  400.0 p50-µs	  3000 p99-µs	  40.00 server-cpu-µs/req	 100 B/op	 2 allocs/op
BenchmarkRLS/descriptors=1/clients=16/impl=floor#01-2      	   20000	     50000 ns/op	     20000 req/s	  500.0 p50-µs	  4000 p99-µs	  60.00 server-cpu-µs/req	 100 B/op	 2 allocs/op
BenchmarkRLS/descriptors=1/clients=16/impl=actorlimitd#01-2	   20000	     50000 ns/op	     24000 req/s	  400.0 p50-µs	  5000 p99-µs	  45.00 server-cpu-µs/req	 100 B/op	 2 allocs/op
BenchmarkRLS/descriptors=1/clients=16/impl=floor#02-2      	   20000	     50000 ns/op	     14000 req/s	  500.0 p50-µs	  4000 p99-µs	  70.00 server-cpu-µs/req	 100 B/op	 2 allocs/op
BenchmarkRLS/descriptors=1/clients=16/impl=actorlimitd#02-2	   20000	     50000 ns/op	     15400 req/s	  400.0 p50-µs	  2000 p99-µs	  35.00 server-cpu-µs/req	 100 B/op	 2 allocs/op
BenchmarkRLSFlood/impl=actorlimitd-redis-2                 	   20000	     50000 ns/op	      9000 req/s	  9000 p99-µs	  0.9990 denied/req	 0.0010 redis-cmds/denied
PASS
`

func TestRatio(t *testing.T) {
	r, err := parse(strings.NewReader(roundsOutput))
	if err != nil {
		t.Fatal(err)
	}
	emb, floor := key{1, 16, "actorlimitd"}, key{1, 16, "floor"}
	tests := []struct {
		a, b   key
		metric string
		want   ratio
		ok     bool
	}{
		{emb, floor, "req/s", ratio{median: 1.2, lo: 1.1, hi: 1.6, rounds: 3}, true},
		{emb, floor, "p99-µs", ratio{median: 0.75, lo: 0.5, hi: 1.25, rounds: 3}, true},
		{floor, emb, "server-cpu-µs/req", ratio{median: 60.0 / 45, lo: 50.0 / 40, hi: 70.0 / 35, rounds: 3}, true},
		{emb, key{1, 16, "floor-codec"}, "req/s", ratio{}, false},
		{emb, floor, "no-such-metric", ratio{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.a.impl+"/"+tt.b.impl+"/"+tt.metric, func(t *testing.T) {
			q, ok := r.ratio(tt.a, tt.b, tt.metric)
			if ok != tt.ok || !near(q.median, tt.want.median) || !near(q.lo, tt.want.lo) || !near(q.hi, tt.want.hi) || q.rounds != tt.want.rounds {
				t.Errorf("ratio = %+v, %v; want %+v, %v", q, ok, tt.want, tt.ok)
			}
		})
	}
	if got, _ := r.pooled(floor, "req/s"); got != 14000 {
		t.Errorf("floor's pooled req/s = %v, want the median of every round's, 14000", got)
	}
	if got := len(r.rls[floor]); got != 3 {
		t.Errorf("floor's rounds = %d, want 3", got)
	}
	if len(r.floodOrder) != 1 || r.flood["actorlimitd-redis"]["denied/req"][0] != 0.999 {
		t.Errorf("flood = %v, want actorlimitd-redis's line", r.flood)
	}
}

func TestRunReportsRoundRatios(t *testing.T) {
	var out strings.Builder
	if err := run(strings.NewReader(roundsOutput), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 1 | 16 | 1.20x (1.10-1.60, 3 rounds), met | – | 0.75x (0.50-1.25, 3 rounds), met |",
		"| 0.75x (0.50-0.80, 3 rounds) | 60 / – / 40 / – / – |",
		"| 16 | 14000 (500 / 4000), 60 µs CPU | 16000 (400 / 3000), 40 µs CPU |",
		"| actorlimitd-redis | 9000 | 9000 | 0.999 | 0.0010 |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// TestRunTargetsOnTheSameTransport checks the targets table when the run
// has actorlimitd's own transport: the floor on it (floor-direct) rather
// than floor-codec, actorlimitd with its settings for speed
// (actorlimitd-direct, actorlimitd-redis-direct) rather than its
// defaults, and at 1 client only the Redis target, at 1.3x envoy
// ratelimit.
func TestRunTargetsOnTheSameTransport(t *testing.T) {
	const output = `BenchmarkRLS/descriptors=1/clients=1/impl=floor-2          	 1000	 1 ns/op	 1000 req/s	 10 p50-µs	 20 p99-µs
BenchmarkRLS/descriptors=1/clients=1/impl=floor-codec-2    	 1000	 1 ns/op	 2000 req/s	 10 p50-µs	 20 p99-µs
BenchmarkRLS/descriptors=1/clients=1/impl=floor-direct-2   	 1000	 1 ns/op	 1500 req/s	 10 p50-µs	 20 p99-µs
BenchmarkRLS/descriptors=1/clients=1/impl=actorlimitd-2    	 1000	 1 ns/op	 900 req/s	 10 p50-µs	 30 p99-µs
BenchmarkRLS/descriptors=1/clients=1/impl=actorlimitd-redis-2	 1000	 1 ns/op	 900 req/s	 10 p50-µs	 20 p99-µs
BenchmarkRLS/descriptors=1/clients=1/impl=actorlimitd-direct-2    	 1000	 1 ns/op	 1200 req/s	 10 p50-µs	 20 p99-µs
BenchmarkRLS/descriptors=1/clients=1/impl=actorlimitd-redis-direct-2	 1000	 1 ns/op	 1250 req/s	 10 p50-µs	 20 p99-µs
BenchmarkRLS/descriptors=1/clients=1/impl=envoy-ratelimit-2	 1000	 1 ns/op	 1000 req/s	 10 p50-µs	 40 p99-µs
`
	var out strings.Builder
	if err := run(strings.NewReader(output), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| embedded / floor-direct req/s (>= 0.95) |",
		"embedded is actorlimitd-direct, Redis is actorlimitd-redis-direct.",
		// 1200/1000 has no target at 1 client; 1200/1500 is below 0.95;
		// 1250/1000 is below 1.3.
		"| 1 | 1 | 1.20x (1 round) | 0.80x (1 round), NOT met | 1.00x (1 round), met | 0.50x (1 round), met | 1.25x (1 round), NOT met |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}
