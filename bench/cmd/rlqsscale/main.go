// Command rlqsscale measures the quota service at scale: a server process
// (this program again, with -serve: quota.Server on a real gRPC listener
// on loopback, the real clock) and, in this process, N simulated Envoys,
// each with its own connection and stream, each reporting every interval
// on its share of B buckets. It prints the server process's CPU time per
// report (getrusage over the measured window, the clients' CPU not
// included) and the time the server took to handle a report, p50 to max,
// and, on the clients' side, the time from an Envoy's first report to its
// first assignments.
//
//	rlqsscale [-envoys 1000] [-buckets 100] [-per-envoy 10] [-interval 1s] [-warmup 5s] [-duration 30s] [-cpuprofile f]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
)

const domain = "scale"

// rules is the server's configuration: every bucket {name: <any>} has
// its own fleet-wide limit of perMinute.
func rules(perMinute int) []byte {
	return fmt.Appendf(nil, "domain: %s\nrate_limit_quota:\n  buckets:\n    - name: scale\n      match: {name: \"*\"}\n      rate_limit: {unit: minute, requests_per_unit: %d}\n", domain, perMinute)
}

func main() {
	serveMode := flag.Bool("serve", false, "run the server process (started by this program)")
	envoys := flag.Int("envoys", 1000, "simulated Envoys, each its own connection and stream")
	buckets := flag.Int("buckets", 100, "buckets")
	perEnvoy := flag.Int("per-envoy", 10, "buckets each Envoy reports (Envoy i reports the buckets b with b = i mod buckets/per-envoy)")
	perMinute := flag.Int("limit", 60000, "each bucket's limit, requests per minute")
	over := flag.Float64("over", 1.5, "total demand of a bucket over its limit")
	interval := flag.Duration("interval", time.Second, "reporting interval")
	warmup := flag.Duration("warmup", 5*time.Second, "time before the measure (every Envoy joined)")
	duration := flag.Duration("duration", 30*time.Second, "the measured window")
	cpuprofile := flag.String("cpuprofile", "", "write the server's CPU profile of the measured window to this file")
	flag.Parse()
	if *serveMode {
		if err := serve(rules(*perMinute), *cpuprofile); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *buckets%*perEnvoy != 0 || *perEnvoy > *buckets {
		log.Fatalf("-per-envoy %d must divide -buckets %d", *perEnvoy, *buckets)
	}
	cmd := exec.Command(os.Args[0], "-serve", "-limit", fmt.Sprint(*perMinute), "-cpuprofile", *cpuprofile)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		log.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		log.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	addr, err := out.ReadString('\n')
	if err != nil {
		log.Fatal(err)
	}
	addr = addr[:len(addr)-1]

	groups := *buckets / *perEnvoy
	perBucket := float64(*envoys) / float64(groups) // Envoys on each bucket
	fair := float64(*perMinute) / 60 / perBucket    // an equal share, requests per second
	fleet := &fleetRun{interval: *interval, demand: fair * *over}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	all := make([]*envoy, *envoys)
	began := time.Now()
	for i := range all {
		var ids []map[string]string
		for b := i % groups; b < *buckets; b += groups {
			ids = append(ids, map[string]string{"name": fmt.Sprintf("b%03d", b)})
		}
		if all[i], err = fleet.connect(ctx, addr, i, ids); err != nil {
			log.Fatal(err)
		}
	}
	connected := time.Since(began)
	// The Envoys start reporting spread over one interval, and the measure
	// begins once every one has joined and warmup has passed.
	for i, e := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.run(ctx, time.Duration(float64(*interval)*float64(i)/float64(*envoys)))
		}()
	}
	time.Sleep(*interval + *warmup)
	fmt.Fprintln(stdin, "start")
	r0, a0 := fleet.reports.Load(), fleet.actions.Load()
	time.Sleep(*duration)
	fmt.Fprintln(stdin, "stop")
	line, err := out.ReadString('\n')
	if err != nil {
		log.Fatal(err)
	}
	sent, actions := fleet.reports.Load()-r0, fleet.actions.Load()-a0
	var st serverStats
	if err := json.Unmarshal([]byte(line), &st); err != nil {
		log.Fatal(err)
	}
	cancel()
	wg.Wait()
	_ = stdin.Close()
	_, _ = io.Copy(io.Discard, out)
	_ = cmd.Wait()

	fmt.Printf("%d Envoys (one connection and stream each), %d buckets, %d per Envoy (%.0f Envoys a bucket), a report every %v, each bucket's limit %d/min, demand %.2f × it; %v measured after %v; GOMAXPROCS %d, %s\n",
		*envoys, *buckets, *perEnvoy, perBucket, *interval, *perMinute, *over, *duration, *warmup, runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Printf("%d streams opened in %v\n", *envoys, connected.Round(time.Millisecond))
	fmt.Printf("reports: %d sent by the Envoys, %d handled by the server (%.0f a second), %d responses (%.2f a report), %d actions received (%.2f a report), %d GCs\n",
		sent, st.Reports, float64(st.Reports)/st.Wall.Seconds(), st.Responses, float64(st.Responses)/float64(max(st.Reports, 1)),
		actions, float64(actions)/float64(max(sent, 1)), st.GCs)
	fmt.Printf("server CPU: %v over %v (%.1f%% of one core), %.1f µs a report\n",
		st.CPU.Round(time.Millisecond), st.Wall.Round(time.Millisecond), 100*st.CPU.Seconds()/st.Wall.Seconds(), float64(st.CPU.Microseconds())/float64(max(st.Reports, 1)))
	fmt.Printf("server handling of a report (%d samples): p50 %v, p90 %v, p99 %v, p99.9 %v, max %v\n", st.Samples,
		st.Handling["p50"], st.Handling["p90"], st.Handling["p99"], st.Handling["p99.9"], st.Handling["max"])
	f := percentiles(fleet.first())
	fmt.Printf("first report to first assignments, client side (%d Envoys, during the joins): p50 %v, p99 %v, max %v\n",
		len(fleet.firsts), f["p50"], f["p99"], f["max"])
}

// fleetRun is the simulated Envoys' shared state.
type fleetRun struct {
	interval time.Duration
	demand   float64 // each Envoy's mean demand on each bucket, requests per second
	reports  atomic.Int64
	actions  atomic.Int64 // received
	mu       sync.Mutex
	firsts   []time.Duration
}

func (f *fleetRun) first() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.firsts...)
}

// envoy is one simulated Envoy: it reports its buckets' usage every
// interval, what it allowed being its demand capped by its share.
type envoy struct {
	f     *fleetRun
	i     int
	cc    *grpc.ClientConn
	st    grpc.BidiStreamingClient[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse]
	ids   []map[string]string
	mu    sync.Mutex
	share map[string]float64 // by bucket name; absent: allow all
	sent  time.Time          // the first report
}

func (f *fleetRun) connect(ctx context.Context, addr string, i int, ids []map[string]string) (*envoy, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	st, err := rlqsv3.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(ctx)
	if err != nil {
		return nil, err
	}
	e := &envoy{f: f, i: i, cc: cc, st: st, ids: ids, share: map[string]float64{}}
	go e.recv()
	return e, nil
}

func (e *envoy) recv() {
	first := true
	for {
		r, err := e.st.Recv()
		if err != nil {
			return
		}
		now := time.Now()
		e.f.actions.Add(int64(len(r.GetBucketAction())))
		e.mu.Lock()
		for _, a := range r.GetBucketAction() {
			tb := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
			if tb == nil {
				continue
			}
			e.share[a.GetBucketId().GetBucket()["name"]] = float64(tb.GetTokensPerFill().GetValue()) / tb.GetFillInterval().AsDuration().Seconds()
		}
		sent := e.sent
		e.mu.Unlock()
		if first {
			first = false
			e.f.mu.Lock()
			e.f.firsts = append(e.f.firsts, now.Sub(sent))
			e.f.mu.Unlock()
		}
	}
}

// run reports every interval from offset on until ctx ends; each
// bucket's demand moves at random within ±30% of the mean.
func (e *envoy) run(ctx context.Context, offset time.Duration) {
	defer func() { _ = e.cc.Close() }()
	rng := rand.New(rand.NewPCG(uint64(e.i), 42))
	select {
	case <-ctx.Done():
		return
	case <-time.After(offset):
	}
	t := time.NewTicker(e.f.interval)
	defer t.Stop()
	last := time.Time{}
	for {
		now := time.Now()
		msg := &rlqsv3.RateLimitQuotaUsageReports{}
		elapsed := now.Sub(last)
		if last.IsZero() {
			msg.Domain, elapsed = domain, 0
		}
		e.mu.Lock()
		for _, id := range e.ids {
			demand := e.f.demand * (0.7 + 0.6*rng.Float64()) * elapsed.Seconds()
			allowed := demand
			if s, ok := e.share[id["name"]]; ok {
				allowed = min(demand, s*elapsed.Seconds())
			}
			msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
				BucketId: &rlqsv3.BucketId{Bucket: id}, TimeElapsed: durationpb.New(elapsed),
				NumRequestsAllowed: uint64(allowed), NumRequestsDenied: uint64(demand - allowed)})
		}
		if last.IsZero() {
			e.sent = now
		}
		e.mu.Unlock()
		last = now
		if err := e.st.Send(msg); err != nil {
			return
		}
		e.f.reports.Add(1)
		select {
		case <-ctx.Done():
			_ = e.st.CloseSend()
			return
		case <-t.C:
		}
	}
}
