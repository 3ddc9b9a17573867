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
geomean,2e-07,

,limiters.txt,
,allocs/op,CI
Limiters/impl=actorlimit/keys=1/callers=2-2,0,∞
Limiters/impl=mutex-map/keys=1/callers=2-2,0,∞
Limiters/impl=throttled/keys=1/callers=2-2,2,∞

,limiters.txt,
,B/key,CI
Memory/impl=actorlimit/keys=100000-2,50,∞
Memory/impl=throttled/keys=100000-2,40,∞

,limiters.txt,
,p999-sec,CI
SweepUnderLoad/keys=100000/callers=2-2,0.0005,∞
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
		"| actorlimit | 50 | 1.25 | – |",
		"| 100 000 | 10 000 | 2 | – | – | – | 500.0 µs | – |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
