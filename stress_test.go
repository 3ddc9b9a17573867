package actorlimit_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
)

// stressDuration is how long TestStress drives the limiter: a few seconds,
// or ACTORLIMIT_STRESS (a Go duration; CI sets half a minute, .ci/soak five minutes).
func stressDuration(t *testing.T) time.Duration {
	v := os.Getenv("ACTORLIMIT_STRESS")
	if v == "" {
		return 3 * time.Second
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err, "ACTORLIMIT_STRESS")
	return d
}

// stressWatchdog fails the test with every goroutine's stack if done is not
// closed within d.
func stressWatchdog(t *testing.T, what string, d time.Duration, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(d):
		buf := make([]byte, 1<<22)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%s hung for %v; goroutines:\n%s", what, d, buf)
	}
}

// TestStress does at once what users do to a limiter: many patient callers,
// callers that give up at random moments, batches, a flood of unique keys
// against a small memory bound, panics injected inside the limiter, and
// Close while calls are in flight. It asserts that nothing hangs, that every
// answer belongs to its own call, that the patient callers' counts are
// exact, and that after Close every call fails fast with ErrClosed.
func TestStress(t *testing.T) {
	clk := newFakeClock()
	boom := func(id string) {
		if strings.HasPrefix(id, "boom") {
			panic("injected fault")
		}
	}
	lim, err := actorlimit.Start(actorlimit.WithClock(clk), actorlimit.WithJanitor(time.Second, 0),
		actorlimit.WithMaxEntries(4096), actorlimit.WithRestarts(1<<30, time.Second), actorlimit.WithInject(boom))
	require.NoError(t, err)
	defer lim.Close()
	// A window of ten years: the clock moves a second at each injected
	// panic, so that the janitor ticks, and no window may end meanwhile.
	p := actorlimit.Policy{Limit: 1 << 40, Period: 10 * 365 * 24 * time.Hour}
	var (
		stop    atomic.Bool // phase 1 is over
		closing atomic.Bool // Close has been called
		failed  = make(chan error, 64)
		fail    = func(err error) {
			select {
			case failed <- err:
			default:
			}
		}
		patients, others sync.WaitGroup
		patientHits      [8]atomic.Int64 // what each patient was told
		impatientCalls   [6]atomic.Int64 // each impatient caller's batches that succeeded
		floodIDs         atomic.Int64    // fresh ids the flood has sent
	)
	// Patient callers: each hits its own id, and its i-th hit must see i. A
	// hit decided together with a "boom" (calls queued one behind the other
	// share one store Decide) fails with ErrPanicked and may or may not have
	// counted: the caller then peeks to learn which.
	for g := range patientHits {
		patients.Add(1)
		go func() {
			defer patients.Done()
			id := fmt.Sprintf("a-patient-%d", g)
			for !stop.Load() {
				res, err := lim.Hit(context.Background(), id, p)
				for errors.Is(err, actorlimit.ErrPanicked) {
					if res, err = lim.Peek(context.Background(), id, p); err == nil {
						patientHits[g].Store(res.Count - 1)
					}
				}
				if err != nil || res.Count != patientHits[g].Load()+1 {
					fail(fmt.Errorf("%s hit %d: count %d, err %v", id, patientHits[g].Load()+1, res.Count, err))
					return
				}
				patientHits[g].Add(1)
			}
		}()
	}
	// Impatient callers and batchers: answers grow and never pass what was sent.
	for g := range impatientCalls {
		others.Add(1)
		go func() {
			defer others.Done()
			impatientCaller(lim, p, g, &impatientCalls[g], &closing, fail)
		}()
	}
	// A flood of unique ids, 64 a batch. The eviction keeps the state of an
	// id hit more often than the flood takes to turn the clock's hand twice
	// (some 2 x 4096 new ids): so that a patient or impatient caller
	// descheduled for a while on a loaded machine (or whose calls were
	// given up before they counted) is still "active", the flood waits,
	// every 16 batches (1024 ids), until each of them has hit again (an
	// impatient caller's state that went idle would rightly be evicted, and
	// its count start again, which the caller would take for another call's
	// answer). It pauses while the
	// patients' counts are read at the end of phase 1, when their entries
	// are idle and a flood that went on would rightly evict them, and resumes
	// for Close.
	floodPaused := make(chan struct{})
	others.Add(1)
	go func() {
		defer others.Done()
		flood := make([]actorlimit.HitRequest, 64)
		results := make([]actorlimit.Result, 64)
		paused := false
		var seen [len(patientHits)]int64
		var seenImpatient [len(impatientCalls)]int64
		for n := 0; ; n++ {
			if n%16 == 0 {
				for g := range patientHits {
					for patientHits[g].Load() == seen[g] && !stop.Load() && len(failed) == 0 {
						time.Sleep(50 * time.Microsecond) // wait for the patient's next hit
					}
					seen[g] = patientHits[g].Load()
				}
				for g := range impatientCalls {
					for impatientCalls[g].Load() == seenImpatient[g] && !stop.Load() && len(failed) == 0 {
						time.Sleep(50 * time.Microsecond) // wait for the caller's next batch to hit both its ids
					}
					seenImpatient[g] = impatientCalls[g].Load()
				}
			}
			if stop.Load() && !paused {
				close(floodPaused)
				paused = true
				for !closing.Load() {
					time.Sleep(time.Millisecond) // wait for phase 2, not for time to pass
				}
			}
			for i := range flood {
				flood[i] = actorlimit.HitRequest{ID: fmt.Sprintf("flood-%d-%d", n, i), Policy: p}
			}
			err := lim.HitMany(context.Background(), flood, results)
			floodIDs.Add(int64(len(flood)))
			if errors.Is(err, actorlimit.ErrPanicked) {
				continue // decided together with a "boom"
			}
			if done := checkEnd(err, &closing, fail, "flood"); done {
				return
			}
			// Every id is fresh: a count other than 1 is another call's
			// answer, or a fresh id that found state.
			for i, r := range results {
				if r.Count != 1 || !r.Allowed {
					fail(fmt.Errorf("flood: fresh id %s got count %d, allowed %v", flood[i].ID, r.Count, r.Allowed))
					return
				}
			}
		}
	}()
	// Panics inside the limiter, and the janitor ticking.
	others.Add(1)
	go func() {
		defer others.Done()
		for !closing.Load() {
			_, err := lim.Hit(context.Background(), "boom", p)
			if !errors.Is(err, actorlimit.ErrPanicked) && !errors.Is(err, actorlimit.ErrClosed) {
				fail(fmt.Errorf("boom: %v, want ErrPanicked", err))
				return
			}
			clk.Advance(time.Second)
			time.Sleep(time.Millisecond) // pace the panics, not a wait for time to pass
		}
	}()

	phase1 := make(chan struct{})
	go func() {
		time.Sleep(stressDuration(t))
		stop.Store(true)
		patients.Wait()
		<-floodPaused
		close(phase1)
	}()
	stressWatchdog(t, "phase 1", stressDuration(t)+time.Minute, phase1)
	select {
	case err := <-failed:
		t.Fatalf("phase 1: %v", err)
	default:
	}
	for g := range patientHits {
		n := patientHits[g].Load()
		res, err := lim.Peek(context.Background(), fmt.Sprintf("a-patient-%d", g), p)
		for errors.Is(err, actorlimit.ErrPanicked) { // decided together with a "boom"
			res, err = lim.Peek(context.Background(), fmt.Sprintf("a-patient-%d", g), p)
		}
		require.NoError(t, err)
		require.Equal(t, n, res.Count, "patient-%d: the limiter holds %d hits, its caller was told of %d", g, res.Count, n)
		require.Positive(t, n, "patient-%d made no hit", g)
	}

	// Close while the others are still calling: each must end with ErrClosed.
	closing.Store(true)
	closed := make(chan struct{})
	go func() {
		_ = lim.Close()
		others.Wait()
		close(closed)
	}()
	stressWatchdog(t, "Close under load", time.Minute, closed)
	_, err = lim.Hit(context.Background(), "late", p)
	require.ErrorIs(t, err, actorlimit.ErrClosed)
	close(failed)
	for err := range failed {
		t.Error(err)
	}
	t.Logf("patient-0 made %d hits; the flood sent %d fresh ids against a bound of 4096", patientHits[0].Load(), floodIDs.Load())
}

// impatientCaller hits two ids of its own, one at a time and in batches,
// with contexts that end at random moments, until the limiter is closed;
// calls counts its batches that succeeded (both ids hit).
func impatientCaller(lim *actorlimit.Limiter, p actorlimit.Policy, g int, calls *atomic.Int64, closing *atomic.Bool, fail func(error)) {
	r := rand.New(rand.NewPCG(uint64(g), 11))
	ids := [2]string{fmt.Sprintf("impatient-%d-a", g), fmt.Sprintf("impatient-%d-b", g)}
	var sent, last [2]int64
	hits := []actorlimit.HitRequest{{ID: ids[0], Policy: p}, {ID: ids[1], Policy: p, N: 2}}
	results := make([]actorlimit.Result, 2)
	for {
		ctx, cancel := randomContext(r)
		var err error
		batch := r.IntN(2) != 0
		if !batch {
			sent[0]++
			results[1] = actorlimit.Result{Count: last[1]}
			results[0], err = lim.Hit(ctx, ids[0], p)
		} else {
			sent[0], sent[1] = sent[0]+1, sent[1]+2
			err = lim.HitMany(ctx, hits, results)
		}
		cancel()
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, actorlimit.ErrPanicked) {
			continue // counted or not: sent stays an upper bound
		}
		if checkEnd(err, closing, fail, ids[0]) {
			return
		}
		for j := range 2 {
			c := results[j].Count
			if c < last[j] || c > sent[j] || (c == last[j] && j == 0) {
				fail(fmt.Errorf("%s: count %d after %d, with %d hits sent: not its own answer", ids[j], c, last[j], sent[j]))
				return
			}
			last[j] = c
		}
		if batch {
			calls.Add(1) // both ids were hit
		}
	}
}

// randomContext returns a context that is already cancelled, is cancelled
// by another goroutine soon, ends after a few microseconds, or never ends.
func randomContext(r *rand.Rand) (context.Context, context.CancelFunc) {
	switch r.IntN(4) {
	case 0:
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	case 1:
		ctx, cancel := context.WithCancel(context.Background())
		go func(n int) {
			for range n {
				runtimeGosched()
			}
			cancel()
		}(r.IntN(50))
		return ctx, cancel
	case 2:
		return context.WithTimeout(context.Background(), time.Duration(1+r.IntN(200))*time.Microsecond)
	}
	return context.WithCancel(context.Background())
}

// checkEnd reports whether a caller should stop: on ErrClosed after Close
// (the expected end), or on any other error, which it reports.
func checkEnd(err error, closing *atomic.Bool, fail func(error), who string) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, actorlimit.ErrClosed) && closing.Load():
		return true
	default:
		fail(fmt.Errorf("%s: %v", who, err))
		return true
	}
}
