//go:build !race

package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

// cyclesEnv names the environment variable that sets how many cycles
// TestStartCloseCycles runs: the soak (issue 41's 500) sets it; the
// normal suite runs a few.
const cyclesEnv = "ACTORLIMIT_CYCLES"

// TestStartCloseCycles starts 3 members, puts them under load (two
// callers at each, about 1000 hits a second each, hitting through the
// close), and then, by turns: kills one
// (no goodbye) or cuts one off (the registry drops it while it runs, so
// the others block it and close their connections to it while it still
// sends), and closes them all at once. A panic in any goroutine, the
// engine's among them, ends the test binary: the test passes only if
// every cycle ran. It reports the closes' times (each member's Close,
// measured from its call to its return) and holds their p99 under
// 1.5 s (the design's bound is 1 s; the margin absorbs a loaded machine).
func TestStartCloseCycles(t *testing.T) {
	cycles := 6
	if s := os.Getenv(cyclesEnv); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "%s=%q", cyclesEnv, s)
		cycles = n
	}
	// The tests before this one (in a shuffled order) may still be
	// opening or closing connections of their own: the count to come back
	// to is the one once they have settled.
	conns := settledClientConnGoroutines(time.Second, 10*time.Second)
	var closes []time.Duration
	for i := range cycles {
		closes = append(closes, startCloseCycle(t, i)...)
		if t.Failed() {
			t.Fatalf("cycle %d failed", i)
		}
	}
	// Every member closed or killed: the engine's connections to the others
	// went with them (they were left open, retrying, each holding its
	// member's engine and queues: about 55 MB a member).
	deadline := time.Now().Add(10 * time.Second)
	for clientConnGoroutines() > conns && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !assert.LessOrEqual(t, clientConnGoroutines(), conns, "goroutines of gRPC client connections left by the closed members") {
		t.Logf("the goroutines that hold gRPC client connections:\n%s", grpcGoroutines())
	}
	slices.Sort(closes)
	p := func(q float64) time.Duration { return closes[min(len(closes)-1, int(q*float64(len(closes))))] }
	t.Logf("%d cycles, %d closes: p50 %v, p99 %v, max %v", cycles, len(closes), p(0.5), p(0.99), closes[len(closes)-1])
	assert.Less(t, p(0.99), 1500*time.Millisecond, "Close p99")
}

// startCloseCycle runs one cycle of TestStartCloseCycles (what happens to
// the third member depends on i) and returns how long each Close took.
func startCloseCycle(t *testing.T, i int) []time.Duration {
	agent := test.NewInMemAgent()
	members := make([]*cluster.Member, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for k := range members {
		wg.Go(func() {
			members[k], errs[k] = cluster.Start(cluster.Config{
				Name: fmt.Sprintf("cycle-%d", i), Provider: test.NewTestProvider(agent),
				PartitionKey: cluster.TestPartitionKey, Partitions: 64,
				Mode: cluster.Mode(i % 2), // DeadAfter and RequestTimeout default: a killed member stays in the view through the close
			})
		})
	}
	wg.Wait()
	for k, err := range errs {
		require.NoError(t, err, "cycle %d: member %d", i, k)
	}
	waitMembers(t, members, 3)
	var (
		stop  atomic.Bool
		calls atomic.Int64
		load  sync.WaitGroup
	)
	p := actorlimit.Policy{Limit: 1000, Period: time.Second}
	for _, m := range members {
		for range 2 {
			load.Go(func() {
				for j := 0; !stop.Load(); j++ {
					ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
					_, _ = m.Limiter.Hit(ctx, "id:"+strconv.Itoa(j%97), p)
					cancel()
					calls.Add(1)
					time.Sleep(time.Millisecond) // about 1000 calls a second: load, not a busy loop that starves Close of the CPU
				}
			})
		}
	}
	for start := calls.Load(); calls.Load() < start+300; {
		time.Sleep(5 * time.Millisecond)
	}
	victim := members[2]
	switch i % 3 {
	case 0:
		victim.Kill()
	case 1: // cut off: the registry drops it while it runs
		agent.DeregisterService(victim.SystemID())
	}
	time.Sleep(time.Duration(i%5) * 50 * time.Millisecond)
	took := make([]time.Duration, len(members))
	for k, m := range members {
		wg.Go(func() {
			start := time.Now()
			_ = m.Close()
			took[k] = time.Since(start)
		})
	}
	wg.Wait()
	stop.Store(true)
	load.Wait()
	if i%3 == 0 {
		took = took[:2] // the victim was killed: its Close does nothing
	}
	return took
}

// TestCloseBounded: a member's Close returns within the design's bound
// (about a second; asserted p99 under 1.5 s for a loaded machine) with its
// peer live, and with its peer killed a moment before (still in the view:
// DeadAfter has not passed), whose hand-off and last sync get no answer.
// RequestTimeout is 2 s, as on a WAN: before the bounds, the hand-off to
// the dead peer waited all of it.
func TestCloseBounded(t *testing.T) {
	cycles := 6
	if s := os.Getenv(cyclesEnv); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "%s=%q", cyclesEnv, s)
		cycles = n
	}
	for _, tc := range []struct {
		name string
		kill bool
	}{{"peer=live", false}, {"peer=killed", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var took []time.Duration
			for i := range cycles {
				members, _ := startMembersWith(t, 2, cluster.Config{
					Mode: cluster.Mode(i % 2), Partitions: 64, RequestTimeout: 2 * time.Second, OwnerWait: 100 * time.Millisecond,
				})
				p := actorlimit.Policy{Limit: 1000, Period: time.Minute}
				for j := range 64 { // both own partitions with keys in them
					_, err := members[j%2].Limiter.Hit(context.Background(), "id:"+strconv.Itoa(j), p)
					require.NoError(t, err)
				}
				if tc.kill {
					members[1].Kill()
				}
				start := time.Now()
				require.NoError(t, members[0].Close())
				took = append(took, time.Since(start))
				_ = members[1].Close()
			}
			slices.Sort(took)
			p99 := took[min(len(took)-1, int(0.99*float64(len(took))))]
			t.Logf("%d closes: p50 %v, p99 %v, max %v", len(took), took[len(took)/2], p99, took[len(took)-1])
			assert.Less(t, p99, 1500*time.Millisecond, "Close p99")
		})
	}
}

// clientConnGoroutines counts the goroutines of open gRPC client
// connections (each has a serializer of its callbacks).
// settledClientConnGoroutines returns clientConnGoroutines once it has
// not changed for quiet, or after at most limit.
func settledClientConnGoroutines(quiet, limit time.Duration) int {
	n, since, end := clientConnGoroutines(), time.Now(), time.Now().Add(limit)
	for time.Since(since) < quiet && time.Now().Before(end) {
		time.Sleep(50 * time.Millisecond)
		if m := clientConnGoroutines(); m != n {
			n, since = m, time.Now()
		}
	}
	return n
}

// grpcGoroutines returns the stacks of the goroutines in grpc-go's client
// code, to tell what a test left open.
func grpcGoroutines() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			var out bytes.Buffer
			for _, g := range bytes.Split(buf[:n], []byte("\n\n")) {
				if bytes.Contains(g, []byte("google.golang.org/grpc")) && !bytes.Contains(g, []byte("grpc.(*Server)")) {
					out.Write(g)
					out.WriteString("\n\n")
				}
			}
			return out.String()
		}
		buf = make([]byte, 2*len(buf))
	}
}

func clientConnGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Count(buf[:n], []byte("grpcsync.(*CallbackSerializer).run"))
		}
		buf = make([]byte, 2*len(buf))
	}
}
