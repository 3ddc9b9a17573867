package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
cpu: AMD EPYC
,limiters.txt,
,sec/op,CI
Limiters/impl=actorlimit/keys=1/callers=2-2,4e-07,∞
Limiters/impl=mutex-map/keys=1/callers=2-2,1e-07,∞
Limiters/impl=throttled/keys=1/callers=2-2,2e-07,∞
Limiters/impl=mutex-btree/keys=1/callers=2-2,5e-07,∞
Middleware/impl=bare/keys=10000/callers=1-2,1e-07,∞
Middleware/impl=actorlimit/keys=10000/callers=1-2,9e-07,∞
Middleware/impl=go-limiter/keys=10000/callers=1-2,1e-06,∞
Middleware/impl=tollbooth/keys=10000/callers=1-2,3e-06,∞
Middleware/impl=bare/keys=10000/callers=256-2,3e-07,∞
Middleware/impl=actorlimit/keys=10000/callers=256-2,1.2e-06,∞
Middleware/impl=go-limiter/keys=10000/callers=256-2,2.4e-06,∞
Middleware/impl=tollbooth/keys=10000/callers=256-2,1.6e-06,∞
geomean,2e-07,

,limiters.txt,
,allocs/op,CI
Limiters/impl=actorlimit/keys=1/callers=2-2,0,∞
Limiters/impl=mutex-map/keys=1/callers=2-2,0,∞
Limiters/impl=throttled/keys=1/callers=2-2,2,∞
Middleware/impl=bare/keys=10000/callers=1-2,1,∞
Middleware/impl=actorlimit/keys=10000/callers=1-2,6,∞
Middleware/impl=go-limiter/keys=10000/callers=1-2,12,∞
Middleware/impl=tollbooth/keys=10000/callers=1-2,29,∞
Middleware/impl=bare/keys=10000/callers=256-2,1,∞
Middleware/impl=actorlimit/keys=10000/callers=256-2,6,∞
Middleware/impl=go-limiter/keys=10000/callers=256-2,12,∞
Middleware/impl=tollbooth/keys=10000/callers=256-2,30,∞

,limiters.txt,
,B/key,CI
Memory/impl=actorlimit/keys=100000-2,50,∞
Memory/impl=throttled/keys=100000-2,40,∞

,limiters.txt,
,checks/s,CI
Scaling/impl=actorlimit/procs=1/callers=256-2,1e+06,∞
Scaling/impl=actorlimit/procs=2/callers=256-2,1.5e+06,∞

,limiters.txt,
,p999-sec,CI
SweepUnderLoad/keys=100000/callers=2-2,0.0005,∞
NoSweep/impl=mutex-btree/keys=100000/callers=2-2,0.0004,∞
`

func TestReport(t *testing.T) {
	res, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	res.write(&out)
	for _, want := range []string{
		"### 1 key\n",
		"| actorlimit | 400 | 4.00 | 0 |",
		"| mutex-map | 100 | 1.00 | 0 |",
		"| throttled | 200 | 2.00 | 2 |",
		"## HTTP middleware, one rule (BenchmarkMiddleware)\n",
		"### 10 000 client IPs\n\n| impl | 1 caller ns/op | × | 256 callers ns/op | × | allocs/op (1 / 256 callers) |\n",
		"| bare | 100 | 0.10 | 300 | 0.19 | 1 / 1 |",
		"| actorlimit | 900 | 0.90 | 1 200 | 0.75 | 6 / 6 |",
		"| go-limiter | 1 000 | 1.00 | 2 400 | 1.50 | 12 / 12 |",
		"| tollbooth | 3 000 | 3.00 | 1 600 | 1.00 | 29 / 30 |",
		"| actorlimit | 50 | 1.25 | – |",
		"| 100 000 | 2 | actorlimit, during a sweep of a tenth | – | – | – | 500.0 µs | – |",
		"| 100 000 | 2 | mutex-btree, no sweep | – | – | – | 400.0 µs | – |",
		"| 1 | 2 | 400 | 0.80 ✓ | 4.00 ✗ | 4.00 ✗ |",
		"| impl | callers | checks/s, 1 proc | checks/s, 2 procs | growth |",
		"| actorlimit | 256 | 1 000 000 | 1 500 000 | 1.50× |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
