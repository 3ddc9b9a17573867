package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"syscall"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"

	"github.com/actorlimit/actorlimit/quota"
)

// serverStats is what the server process measured between "start" and
// "stop".
type serverStats struct {
	Reports   int64         // usage reports handled
	Responses int64         // responses sent
	CPU       time.Duration // the process's user + system CPU time
	Wall      time.Duration
	GCs       uint32
	// Handling holds the percentiles of a report's handling time: from
	// its message decoded to the handler asking for the next, every
	// assignment it caused in its streams' outboxes.
	Handling map[string]time.Duration
	Samples  int
}

// timed wraps a server stream to time each report's handling: the time
// from RecvMsg returning a message to the next RecvMsg call, which
// quota.Server's receiving loop makes once the report is handled.
type timed struct {
	grpc.ServerStream
	h   *handling
	got time.Time
}

func (w *timed) RecvMsg(m any) error {
	if !w.got.IsZero() {
		w.h.add(time.Since(w.got))
	}
	err := w.ServerStream.RecvMsg(m)
	w.got = time.Now()
	return err
}

// handling collects the handling times while on.
type handling struct {
	mu  sync.Mutex
	on  bool
	all []time.Duration
}

func (h *handling) add(d time.Duration) {
	h.mu.Lock()
	if h.on {
		h.all = append(h.all, d)
	}
	h.mu.Unlock()
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// percentiles returns p50, p90, p99, p99.9 and the maximum of ds.
func percentiles(ds []time.Duration) map[string]time.Duration {
	out := map[string]time.Duration{}
	if len(ds) == 0 {
		return out
	}
	slices.Sort(ds)
	at := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	out["p50"], out["p90"], out["p99"], out["p99.9"], out["max"] = at(0.5), at(0.9), at(0.99), at(0.999), ds[len(ds)-1]
	return out
}

// serve runs the quota server of rules on a loopback port, prints the
// port, and then obeys stdin: "start" begins a measure, "stop" ends it and
// prints it as JSON; end of input exits.
func serve(rules []byte, cpuprofile string) error {
	cfg, err := quota.Parse(map[string][]byte{"scale.yaml": rules})
	if err != nil {
		return err
	}
	srv := quota.New(cfg, quota.Options{})
	h := &handling{}
	gs := grpc.NewServer(grpc.StreamInterceptor(func(s any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(s, &timed{ServerStream: ss, h: h})
	}))
	rlqsv3.RegisterRateLimitQuotaServiceServer(gs, srv)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = gs.Serve(l) }()
	fmt.Println(l.Addr().String())
	var (
		cpu0     time.Duration
		wall0    time.Time
		st0      quota.Stats
		gc0      runtime.MemStats
		profFile *os.File
	)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "start":
			if cpuprofile != "" {
				if profFile, err = os.Create(cpuprofile); err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(profFile); err != nil {
					return err
				}
			}
			h.mu.Lock()
			h.on, h.all = true, h.all[:0]
			h.mu.Unlock()
			runtime.ReadMemStats(&gc0)
			st0, cpu0, wall0 = srv.Stats(), cpuTime(), time.Now()
		case "stop":
			cpu, wall, st := cpuTime()-cpu0, time.Since(wall0), srv.Stats()
			if profFile != nil {
				pprof.StopCPUProfile()
				_ = profFile.Close()
			}
			var gc1 runtime.MemStats
			runtime.ReadMemStats(&gc1)
			h.mu.Lock()
			h.on = false
			all := slices.Clone(h.all)
			h.mu.Unlock()
			out := serverStats{Reports: st.Reports - st0.Reports, Responses: st.Responses - st0.Responses, CPU: cpu, Wall: wall,
				GCs: gc1.NumGC - gc0.NumGC, Handling: percentiles(all), Samples: len(all)}
			if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
				return err
			}
		}
	}
	gs.Stop()
	return in.Err()
}
