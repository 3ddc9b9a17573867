// Command cluster starts three members of an actorlimit cluster on
// loopback, in this one process, drives load on one hot id spread over the
// three for a few windows, and prints what each member allowed against the
// limit.
//
//	go run ./examples/cluster
//	go run ./examples/cluster -mode=owner -limit=500 -window=1s -windows=3
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

func main() {
	mode := flag.String("mode", "local-first", "local-first or owner")
	limit := flag.Int64("limit", 1000, "hits allowed per window, over the whole cluster")
	window := flag.Duration("window", time.Second, "the window (whole milliseconds)")
	windows := flag.Int("windows", 3, "how many windows to drive")
	rate := flag.Int("rate", 1000, "hits a second offered at each member")
	syncEvery := flag.Duration("sync", cluster.DefaultSyncEvery, "local-first sync interval")
	flag.Parse()
	m := cluster.LocalFirst
	switch *mode {
	case "local-first":
	case "owner":
		m = cluster.Owner
	default:
		fmt.Fprintf(os.Stderr, "-mode: %q is neither local-first nor owner\n", *mode)
		os.Exit(2)
	}
	if err := run(m, actorlimit.Policy{Limit: *limit, Period: *window}, *windows, *rate, *syncEvery); err != nil {
		log.Fatal(err)
	}
}

func run(mode cluster.Mode, p actorlimit.Policy, windows, rate int, syncEvery time.Duration) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if rate <= 0 || windows <= 0 {
		return fmt.Errorf("-rate and -windows must be positive")
	}
	agent := test.NewInMemAgent()
	members := make([]*cluster.Member, 3)
	for i := range members {
		m, err := cluster.Start(cluster.Config{Name: "example", Provider: test.NewTestProvider(agent), Mode: mode, SyncEvery: syncEvery})
		if err != nil {
			return err
		}
		defer m.Limiter.Close()
		members[i] = m
	}
	for len(members[0].Members()) < len(members) {
		time.Sleep(50 * time.Millisecond) // the members find each other
	}
	// Start at the beginning of a window, so each window is whole.
	time.Sleep(time.Until(time.Now().Truncate(p.Period).Add(p.Period)))
	allowed := make([][]atomic.Int64, windows)
	for w := range allowed {
		allowed[w] = make([]atomic.Int64, len(members))
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second / time.Duration(rate))
			defer tick.Stop()
			for now := range tick.C {
				w := int(now.Sub(start) / p.Period)
				if w >= windows {
					return
				}
				res, err := m.Limiter.Hit(context.Background(), "hot", p)
				if err != nil {
					log.Printf("member %d: %v", i, err)
					continue
				}
				if res.Allowed {
					allowed[w][i].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	for w := range allowed {
		var total int64
		fmt.Printf("window %d:", w+1)
		for i := range members {
			n := allowed[w][i].Load()
			total += n
			fmt.Printf(" member %d allowed %d,", i+1, n)
		}
		fmt.Printf(" total %d of limit %d (%.3f×)\n", total, p.Limit, float64(total)/float64(p.Limit))
	}
	return nil
}
