package analytics_test

import (
	"fmt"
	"time"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/analytics"
	"github.com/actorlimit/actorlimit/httpadapter"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

func Example() {
	clk := testkit.NewClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	an, err := analytics.New(analytics.Config{Clock: clk}) // 10 s slots, an hour kept
	if err != nil {
		panic(err)
	}
	defer an.Close()
	// The middleware calls Observe for each rule it matched; here by hand:
	// a client with 2 requests, a bot with 50, under a limit of 60.
	for i := range 2 {
		an.Observe(httpadapter.Observation{Rule: "per-ip", Group: "192.0.2.1",
			Result: actorlimit.Result{Allowed: true, Limit: 60, Remaining: int64(59 - i)}})
	}
	for i := range 50 {
		an.Observe(httpadapter.Observation{Rule: "per-ip", Group: "203.0.113.66",
			Result: actorlimit.Result{Allowed: true, Limit: 60, Remaining: int64(59 - i)}})
	}
	r := an.Snapshot().Rules[0]
	slot := r.Slots[len(r.Slots)-1]
	for b, n := range slot.Requests {
		if n > 0 {
			lo, hi := analytics.BucketRange(b)
			fmt.Printf("requests %d-%d: %d group(s)\n", lo, hi, n)
		}
	}
	for b, n := range slot.Remaining {
		if n > 0 {
			lo, hi := analytics.BucketRange(b)
			fmt.Printf("remaining %d-%d: %d group(s)\n", lo, hi, n)
		}
	}
	fmt.Println("heaviest:", r.Top[0].Group, r.Top[0].Count)
	// Output:
	// requests 2-3: 1 group(s)
	// requests 32-63: 1 group(s)
	// remaining 8-15: 1 group(s)
	// remaining 32-63: 1 group(s)
	// heaviest: 203.0.113.66 50
}
