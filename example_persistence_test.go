package actorlimit_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/actorlimit/actorlimit"
)

// A limiter that keeps its counts across a restart of the process: the
// second limiter, started on the same directory, finds the first one's
// count.
func ExampleWithPersistence() {
	dir, err := os.MkdirTemp("", "actorlimit-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	p := actorlimit.Policy{Limit: 3, Period: time.Hour}
	ctx := context.Background()

	for run := 1; run <= 2; run++ {
		lim, err := actorlimit.Start(actorlimit.WithClock(stoppedClock{}),
			actorlimit.WithPersistence(dir, actorlimit.PersistConfig{}))
		if err != nil {
			panic(err) // a damaged file in dir, by default
		}
		for range 2 {
			res, err := lim.Hit(ctx, "user:42", p)
			if err != nil {
				panic(err)
			}
			fmt.Printf("run %d: allowed %t, count %d\n", run, res.Allowed, res.Count)
		}
		lim.Close() // writes a last snapshot
	}
	// Output:
	// run 1: allowed true, count 1
	// run 1: allowed true, count 2
	// run 2: allowed true, count 3
	// run 2: allowed false, count 4
}
