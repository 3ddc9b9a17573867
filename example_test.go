package actorlimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/actorlimit/actorlimit"
)

// A clock stopped at 12:00:10 UTC, so that the output does not depend on
// when the example runs. Real code leaves WithClock out.
type stoppedClock struct{}

func (stoppedClock) Now() time.Time { return time.Date(2026, 1, 1, 12, 0, 10, 0, time.UTC) }

// Start, check, close: what a Go program writes, on the wall clock.
func ExampleStart() {
	lim, err := actorlimit.Start()
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	res, err := lim.Hit(context.Background(), "user:42", actorlimit.Policy{Limit: 100, Period: time.Hour})
	if err != nil {
		panic(err) // bad input, a closed limiter or a cancelled context; never "over the limit"
	}
	fmt.Println("allowed:", res.Allowed, "count:", res.Count)
	// Output:
	// allowed: true count: 1
}

// The raterlimiter's own use: at most 3 requests per 30 s per peer.
func Example() {
	lim, err := actorlimit.Start(actorlimit.WithClock(stoppedClock{}))
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	for i := 1; i <= 5; i++ {
		res, err := lim.CheckRate("192.0.2.7", 30000, 3)
		if err != nil {
			panic(err)
		}
		if res.Allowed {
			fmt.Printf("request %d: allowed, %d remaining\n", i, res.Remaining)
		} else {
			fmt.Printf("request %d: 413, retry after %v\n", i, res.RetryAfter)
		}
	}
	// Output:
	// request 1: allowed, 2 remaining
	// request 2: allowed, 1 remaining
	// request 3: allowed, 0 remaining
	// request 4: 413, retry after 20s
	// request 5: 413, retry after 20s
}

// Hit takes a Policy; HitN counts several hits at once, Peek looks without
// counting and Reset forgets.
func ExampleLimiter_Hit() {
	lim, err := actorlimit.Start(actorlimit.WithClock(stoppedClock{}))
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	ctx := context.Background()
	perMinute := actorlimit.Policy{Limit: 10, Period: time.Minute}

	res, _ := lim.HitN(ctx, "user:42", perMinute, 8)
	fmt.Println("8 hits:", res.Allowed, res.Count, res.Remaining)
	res, _ = lim.HitN(ctx, "user:42", perMinute, 3)
	fmt.Println("3 more:", res.Allowed, res.Count, res.RetryAfter)
	res, _ = lim.Peek(ctx, "user:42", perMinute)
	fmt.Println("peek:  ", res.Allowed, res.Count)
	_ = lim.Reset(ctx, "user:42", perMinute)
	res, _ = lim.Hit(ctx, "user:42", perMinute)
	fmt.Println("reset: ", res.Allowed, res.Count)
	// Output:
	// 8 hits: true 8 2
	// 3 more: false 11 50s
	// peek:   false 11
	// reset:  true 1
}

// HitMany checks several limits in one round trip through the mailbox.
func ExampleLimiter_HitMany() {
	lim, err := actorlimit.Start(actorlimit.WithClock(stoppedClock{}))
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	hits := []actorlimit.HitRequest{
		{ID: "ip:192.0.2.7", Policy: actorlimit.Policy{Limit: 100, Period: time.Minute}},
		{ID: "user:42", Policy: actorlimit.Policy{Limit: 1000, Period: time.Hour}, N: 5},
	}
	results := make([]actorlimit.Result, len(hits))
	if err := lim.HitMany(context.Background(), hits, results); err != nil {
		panic(err)
	}
	for i, r := range results {
		fmt.Println(hits[i].ID, r.Allowed, r.Remaining)
	}
	// Output:
	// ip:192.0.2.7 true 99
	// user:42 true 995
}
