// Command cluster starts three members of an actorlimit cluster on
// loopback, drives load on one hot id spread over the three for a few
// windows, and prints what each member allowed against the limit and the
// predicted over-admission bound, limit + (members-1) × rate × sync.
//
// By default the three members run in this one process, with the engine's
// in-memory test provider. With -procs they run as three OS processes (this
// program, started again with -member), which find each other with the
// engine's automanaged provider: seed addresses, no registry.
//
//	go run ./examples/cluster
//	go run ./examples/cluster -procs
//	go run ./examples/cluster -mode=owner -limit=500 -window=1s -windows=3
//
// In owner mode, -strict makes a check whose owner does not answer within
// cluster.Config.OwnerWait fail rather than be decided on the member's
// share: exact, or an error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

// members is how many members the example runs.
const members = 3

// settings are the flags that both the parent and the members read.
type settings struct {
	mode      cluster.Mode
	strict    bool
	policy    actorlimit.Policy
	windows   int
	rate      int
	syncEvery time.Duration
}

func main() {
	mode := flag.String("mode", "local-first", "local-first or owner")
	limit := flag.Int64("limit", 1000, "hits allowed per window, over the whole cluster")
	window := flag.Duration("window", time.Second, "the window (whole milliseconds)")
	windows := flag.Int("windows", 3, "how many windows to drive")
	rate := flag.Int("rate", 1000, "hits a second offered at each member")
	syncEvery := flag.Duration("sync", cluster.DefaultSyncEvery, "local-first sync interval")
	strict := flag.Bool("strict", false, "owner mode: a check whose owner does not answer within OwnerWait fails instead of falling back to the member's share")
	procs := flag.Bool("procs", false, "run the 3 members as 3 OS processes")
	member := flag.Int("member", -1, "internal: run as member i of a -procs run")
	ports := flag.String("ports", "", "internal: the members' ports, for -member")
	flag.Parse()
	s := settings{policy: actorlimit.Policy{Limit: *limit, Period: *window}, windows: *windows, rate: *rate, syncEvery: *syncEvery, strict: *strict}
	switch *mode {
	case "local-first":
	case "owner":
		s.mode = cluster.Owner
	default:
		fmt.Fprintf(os.Stderr, "-mode: %q is neither local-first nor owner\n", *mode)
		os.Exit(2)
	}
	if err := s.validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *member >= 0 {
		if err := runMember(s, *member, *ports); err != nil {
			log.Fatal(err)
		}
		return
	}
	run := runInProcess
	if *procs {
		run = runProcs
	}
	counts, err := run(s)
	if err != nil {
		log.Fatal(err)
	}
	report(os.Stdout, s, counts)
}

func (s settings) validate() error {
	if err := s.policy.Validate(); err != nil {
		return err
	}
	if s.rate <= 0 || s.windows <= 0 {
		return errors.New("-rate and -windows must be positive")
	}
	return nil
}

// runInProcess runs the three members in this process and returns what
// each did in each window.
func runInProcess(s settings) ([][]tally, error) {
	agent := test.NewInMemAgent()
	ms := make([]*cluster.Member, members)
	for i := range ms {
		m, err := cluster.Start(cluster.Config{Name: "example", Provider: test.NewTestProvider(agent), Mode: s.mode, SyncEvery: s.syncEvery, Strict: s.strict})
		if err != nil {
			return nil, err
		}
		defer m.Limiter.Close()
		ms[i] = m
	}
	for len(ms[0].Members()) < len(ms) {
		time.Sleep(50 * time.Millisecond) // the members find each other
	}
	// Start at the beginning of a window, so each window is whole.
	start := windowAfter(time.Now(), s.policy.Period, 1)
	counts := make([][]tally, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() { counts[i] = drive(m, s, start, func(err error) { log.Printf("member %d: %v", i+1, err) }) })
	}
	wg.Wait()
	return counts, nil
}

// tally is what one member did in one window: the hits it decided there,
// and how many of those it allowed.
type tally struct{ offered, allowed int64 }

// drive offers s.rate hits a second on one hot id at m from start for
// s.windows windows, and returns, for each window, how many hits it
// decided there and how many it allowed. Each hit is filed under the
// window in which the limiter decided it (from the result), not the window
// in which it was sent: a hit sent just before a window's end may be
// decided just after it, and counts against the next window's limit. A
// driver that wakes late (a loaded machine) sends the hits it owes at once,
// at most one sync interval's worth (what the predicted bound allows a
// member between two syncs), so the rate offered holds however the process
// is scheduled, and a long stall is not made up in one burst.
func drive(m *cluster.Member, s settings, start time.Time, fail func(error)) []tally {
	time.Sleep(time.Until(start))
	counts := make([]tally, s.windows)
	tick := time.NewTicker(time.Second / time.Duration(s.rate))
	defer tick.Stop()
	end := start.Add(time.Duration(s.windows) * s.policy.Period)
	burst := max(1, int64(s.rate)*int64(s.syncEvery)/int64(time.Second))
	var sent int64
	for now := range tick.C {
		if !now.Before(end) {
			break
		}
		due := int64(time.Since(start))*int64(s.rate)/int64(time.Second) + 1
		sent = max(sent, due-burst)
		for ; sent < due; sent++ {
			at := time.Now()
			res, err := m.Limiter.Hit(context.Background(), "hot", s.policy)
			if err != nil {
				fail(err)
				continue
			}
			if w, ok := decidedIn(res, at, start, s.policy.Period, s.windows); ok {
				counts[w].offered++
				if res.Allowed {
					counts[w].allowed++
				}
			}
		}
	}
	return counts
}

// windowAfter returns the start of the n-th window of length period after
// the one holding t. Windows are the limiter's: [k*period, (k+1)*period) in
// Unix time.
func windowAfter(t time.Time, period time.Duration, n int64) time.Time {
	k := t.UnixNano()/int64(period) + n
	return time.Unix(0, k*int64(period))
}

// decidedIn returns the index, counted from start, of the fixed window in
// which the limiter decided a hit sent at sent, and whether it is one of
// the windows driven. A fixed window's result says when its window ends
// (ResetAfter after the decision), and the decision came after sent and
// less than a window later, so the window's end is the first multiple of
// period at or after sent + ResetAfter.
func decidedIn(res actorlimit.Result, sent, start time.Time, period time.Duration, windows int) (int, bool) {
	p := int64(period)
	at := sent.UnixNano() + int64(res.ResetAfter)
	end := (at + p - 1) / p * p
	w := (end - p - start.UnixNano()) / p
	return int(w), w >= 0 && w < int64(windows)
}

// bound is the predicted most a window allows: the limit, plus in
// LocalFirst mode what the other members admit in one sync interval.
func (s settings) bound() int64 {
	b := s.policy.Limit
	if s.mode == cluster.LocalFirst {
		b += int64(members-1) * int64(s.rate) * int64(s.syncEvery) / int64(time.Second)
	}
	return b
}

// report writes to w, for each window, what each member allowed of the
// hits it decided there (counts[i][w]), the total, and the predicted
// bound.
func report(w io.Writer, s settings, counts [][]tally) {
	for win := range s.windows {
		var total, offered int64
		fmt.Fprintf(w, "window %d:", win+1)
		for i := range counts {
			c := counts[i][win]
			total += c.allowed
			offered += c.offered
			fmt.Fprintf(w, " member %d allowed %d of %d,", i+1, c.allowed, c.offered)
		}
		fmt.Fprintf(w, " total %d of limit %d (%.3f×), predicted bound %d, %d offered\n",
			total, s.policy.Limit, float64(total)/float64(s.policy.Limit), s.bound(), offered)
	}
}
