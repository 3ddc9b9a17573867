// Command rlqssim runs the fleet simulator (package fleet): N simulated
// Envoys speaking RLQS over gRPC to an in-process quota server, on a fake
// clock, for each demand pattern; it prints per window the fleet's
// admitted total against the limit and each Envoy's share against its
// demand, then the time to converge after each change and the summary.
//
//	rlqssim [-envoys 20] [-limit 1200] [-interval 1s] [-duration 45s] [-over 1.5] [-pattern shifting] [-envoy-columns 6]
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/actorlimit/actorlimit/bench/fleet"
)

func main() {
	n := flag.Int("envoys", 20, "simulated Envoys")
	limit := flag.Uint("limit", 1200, "the bucket's limit, requests per minute")
	interval := flag.Duration("interval", time.Second, "reporting interval")
	duration := flag.Duration("duration", 45*time.Second, "simulated time per pattern")
	over := flag.Float64("over", 1.5, "total demand over the limit")
	pattern := flag.String("pattern", "", "run only this pattern (steady, skewed, shifting, join-leave)")
	cols := flag.Int("envoy-columns", 6, "Envoys shown per window")
	carry := flag.Bool("carry-tokens", false, "a changed token bucket keeps its tokens instead of starting full")
	burst := flag.Float64("burst-intervals", 0, "token bucket size in reporting intervals of the share (0: the rule's default)")
	flag.Parse()
	rate := float64(*limit) / 60
	for _, p := range fleet.Patterns(*n, rate, *over, *interval) {
		if *pattern != "" && p.Name != *pattern {
			continue
		}
		start := time.Now()
		res, err := fleet.Run(fleet.Config{Envoys: *n, LimitPerMinute: uint32(*limit), Interval: *interval, Duration: *duration,
			Demand: p.Demand, Changes: p.Changes, NoAssignment: fleet.Allow, Expired: fleet.Deny, CarryTokens: *carry, BurstIntervals: *burst})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("## %s: %d Envoys, limit %d/min (%.1f/s), reporting every %v, demand %.2f × limit\n", p.Name, *n, *limit, rate, *interval, *over)
		fmt.Printf("%8s %9s %7s %6s  %s\n", "window", "admitted", "limit", "ratio", "envoy: share/demand in req/s (admitted in the window)")
		for _, w := range res.Windows {
			var b strings.Builder
			shown := 0
			for i, e := range w.Envoys {
				if !e.Present || shown >= *cols {
					continue
				}
				shown++
				fmt.Fprintf(&b, " %d:%.1f/%.1f(%d)", i, e.Share, e.Demand, e.Admitted)
			}
			fmt.Printf("%8v %9d %7.0f %6.3f %s\n", w.Start, w.Admitted, w.Limit, float64(w.Admitted)/w.Limit, b.String())
		}
		for i, c := range res.Converge {
			fmt.Printf("change at %v: converged in %v\n", p.Changes[i], c)
		}
		s := fleet.Summarize(res, p.Changes, *interval)
		fmt.Printf("summary: max admitted/limit %.3f, min admitted/limit when over-demanded %.3f, min Jain %.4f, max convergence %v, %d reports in %v\n\n",
			s.MaxOver, s.MinOverDemanded, s.MinJain, s.MaxConverge, res.Reports, time.Since(start).Round(time.Millisecond))
	}
	os.Exit(0)
}
