package actorlimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

// Every algorithm on one limiter: five hits at once under 3 per second.
// LeakyBucket lets Burst+1 through, each with the Delay that spaces them
// at the limit's rate.
func Example_algorithms() {
	clock := testkit.NewClock(time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC))
	lim, err := actorlimit.Start(actorlimit.WithClock(clock))
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	ctx := context.Background()
	for _, alg := range []actorlimit.Algorithm{
		actorlimit.FixedWindow, actorlimit.SlidingWindow, actorlimit.SlidingLog,
		actorlimit.GCRA, actorlimit.TokenBucket, actorlimit.LeakyBucket,
	} {
		p := actorlimit.Policy{Algorithm: alg, Limit: 3, Period: time.Second, Burst: 3}
		fmt.Printf("%-13v", alg)
		for range 5 {
			res, err := lim.Hit(ctx, "client", p)
			if err != nil {
				panic(err)
			}
			switch {
			case res.Delay > 0:
				fmt.Printf(" wait %v", res.Delay)
			case res.Allowed:
				fmt.Print(" yes")
			default:
				fmt.Printf(" no (retry in %v)", res.RetryAfter)
			}
		}
		fmt.Println()
	}
	// Output:
	// FixedWindow   yes yes yes no (retry in 1s) no (retry in 1s)
	// SlidingWindow yes yes yes no (retry in 1.016666667s) no (retry in 1.016666667s)
	// SlidingLog    yes yes yes no (retry in 1.001s) no (retry in 1.001s)
	// GCRA          yes yes yes no (retry in 333.333334ms) no (retry in 333.333334ms)
	// TokenBucket   yes yes yes no (retry in 333.333334ms) no (retry in 333.333334ms)
	// LeakyBucket   yes wait 333.333334ms wait 666.666667ms wait 1s no (retry in 333.333334ms)
}
