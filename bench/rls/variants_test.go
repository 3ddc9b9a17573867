package rls

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// variant is one server of BenchmarkRLSVariants: actorlimitd with flags,
// or the floor (rlsfloor) with flags when its name starts with "floor".
type variant struct {
	name  string
	flags []string
	env   []string // NAME=value, from the flags' env:NAME=value
}

// parseVariants reads BENCH_RLS_VARIANTS: variants separated by ';', each
// NAME=FLAGS with the flags separated by spaces (none: the defaults); a
// flag env:NAME=value sets the server's environment instead (actorlimitd
// only: env:GOGC=200).
func parseVariants(s string) ([]variant, error) {
	var out []variant
	for _, v := range strings.Split(s, ";") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		name, flags, ok := strings.Cut(v, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, "/#") {
			return nil, fmt.Errorf("BENCH_RLS_VARIANTS: %q: want NAME=FLAGS, a name without / or #", v)
		}
		if slices.ContainsFunc(out, func(o variant) bool { return o.name == name }) {
			return nil, fmt.Errorf("BENCH_RLS_VARIANTS: %q twice", name)
		}
		v := variant{name: name}
		for _, f := range strings.Fields(flags) {
			if e, ok := strings.CutPrefix(f, "env:"); ok {
				v.env = append(v.env, e)
			} else {
				v.flags = append(v.flags, f)
			}
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("BENCH_RLS_VARIANTS=%q: no variant", s)
	}
	return out, nil
}

// parseClients reads BENCH_RLS_CLIENTS, client counts separated by
// commas; 16 and 64 when it is empty.
func parseClients(s string) ([]int, error) {
	if s == "" {
		return []int{16, 64}, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("BENCH_RLS_CLIENTS: %q: want a count of clients, at least 1", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// BenchmarkRLSVariants compares servers that differ in their flags, one
// descriptor a request, in alternating rounds (BENCH_RLS_ROUNDS): the A/B
// test of a server setting. It runs only with BENCH_RLS_VARIANTS, e.g.
//
//	BENCH_RLS_VARIANTS='base=;window=-grpc-window-bytes=65536;floor=' \
//	BENCH_RLS_CLIENTS=16,64 BENCH_RLS_ROUNDS=5 \
//	go test -run='^$' -bench='^BenchmarkRLSVariants$' -benchtime=2s ./rls/
//
// BENCH_RLS_CLIENT_WINDOW (clientDialOptions) applies as in BenchmarkRLS.
// A variant whose name starts with floor is bench/cmd/rlsfloor; one whose
// name starts with envoy is envoy ratelimit on the Redis its one flag names
// (envoy=-redis 127.0.0.1:6379), to compare actorlimitd's Redis variants
// with it in the same rounds.
// Each run
// reports req/s, p50-µs, p99-µs, the server's CPU a request and this
// process's (the clients', client-cpu-µs/req); at the end, the log holds
// each variant's medians over the rounds and its ratios to the first
// variant computed within each round.
func BenchmarkRLSVariants(b *testing.B) {
	spec := os.Getenv("BENCH_RLS_VARIANTS")
	if spec == "" {
		b.Skip("BENCH_RLS_VARIANTS is not set")
	}
	variants, err := parseVariants(spec)
	if err != nil {
		b.Fatal(err)
	}
	clients, err := parseClients(os.Getenv("BENCH_RLS_CLIENTS"))
	if err != nil {
		b.Fatal(err)
	}
	rounds, err := benchRounds()
	if err != nil {
		b.Fatal(err)
	}
	dial, err := clientDialOptions()
	if err != nil {
		b.Fatal(err)
	}
	cfg := writeConfig(b, map[string]string{"bench.yaml": benchConfig})
	impls := make([]*rlsImpl, len(variants))
	for i, v := range variants {
		im := &rlsImpl{name: v.name, dial: dial}
		if strings.HasPrefix(v.name, "floor") {
			im.addr = startFloor(b, v.flags...)
		} else if strings.HasPrefix(v.name, "envoy") {
			ra, ok := redisOf(v.flags)
			if !ok {
				b.Fatalf("BENCH_RLS_VARIANTS: %s: envoy ratelimit takes one flag, -redis ADDR", v.name)
			}
			im.addr = startEnvoy(b, cfg, ra, envoyOptions{})
		} else {
			im.addr = startActorlimitdEnvFlags(b, cfg, "", v.env, v.flags...)
		}
		impls[i] = im
	}
	b.Cleanup(func() {
		for _, im := range impls {
			im.close()
		}
	})
	// runs[clients][variant][round]: the run's metrics
	runs := map[int]map[string]map[int]variantRun{}
	for round := range rounds {
		for _, c := range clients {
			for _, im := range impls {
				b.Run(fmt.Sprintf("clients=%d/variant=%s", c, im.name), func(b *testing.B) {
					r := measureVariant(b, im, c)
					if runs[c] == nil {
						runs[c] = map[string]map[int]variantRun{}
					}
					if runs[c][im.name] == nil {
						runs[c][im.name] = map[int]variantRun{}
					}
					runs[c][im.name][round] = r // the last of b's runs (b.N settled)
				})
			}
		}
	}
	// printed, not logged: a parent benchmark's log shows only with -v
	fmt.Print(variantSummary(runs, clients, variants))
}

// redisOf returns the address that flags give -redis ("-redis ADDR" or
// "-redis=ADDR"), and whether they give one.
func redisOf(flags []string) (string, bool) {
	for i, f := range flags {
		if a, ok := strings.CutPrefix(f, "-redis="); ok && a != "" {
			return a, true
		}
		if f == "-redis" && i+1 < len(flags) {
			return flags[i+1], true
		}
	}
	return "", false
}

// clientDialOptions are the benchmarks' clients' options beyond the
// defaults: with BENCH_RLS_CLIENT_WINDOW=N, a fixed HTTP/2 window of N
// bytes, which turns off grpc-go's estimate of the bandwidth-delay product
// on the client (the PING it sends when an answer arrives): a client like
// Envoy, which sends no such PING.
func clientDialOptions() ([]grpc.DialOption, error) {
	w := os.Getenv("BENCH_RLS_CLIENT_WINDOW")
	if w == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(w)
	if err != nil || n < 64<<10 || n > 1<<31-1 {
		return nil, fmt.Errorf("BENCH_RLS_CLIENT_WINDOW=%q: want bytes, 65536 to 2147483647", w)
	}
	return []grpc.DialOption{grpc.WithStaticStreamWindowSize(int32(n)), grpc.WithStaticConnWindowSize(int32(n))}, nil
}

// variantRun is what one run of BenchmarkRLSVariants measured.
type variantRun struct {
	perSecond, p99, serverCPU, clientCPU float64
	reads, writes                        float64 // the server's system calls a request
	clientGCs                            float64 // the clients' collections a thousand requests
}

// measureVariant runs b's requests on im from c clients, one descriptor a
// request, and reports its metrics.
func measureVariant(b *testing.B, im *rlsImpl, c int) variantRun {
	workers := im.workers(b, c, 1)
	var (
		srv0, cli0 time.Duration
		rd0, wr0   int64
	)
	res := runLoad(b, b.N, workers, func() {
		srv0, _ = serverCPU(im.addr)
		cli0, _ = processCPU(os.Getpid())
		rd0, wr0, _ = serverSyscalls(im.addr)
	})
	srv1, _ := serverCPU(im.addr)
	cli1, _ := processCPU(os.Getpid())
	rd1, wr1, _ := serverSyscalls(im.addr)
	n := float64(b.N)
	r := variantRun{
		perSecond: res.PerSecond(),
		p99:       float64(res.P99.Nanoseconds()) / 1e3,
		serverCPU: float64((srv1 - srv0).Nanoseconds()) / 1e3 / n,
		clientCPU: float64((cli1 - cli0).Nanoseconds()) / 1e3 / n,
		reads:     float64(rd1-rd0) / n,
		writes:    float64(wr1-wr0) / n,
		clientGCs: float64(res.ClientGCs) * 1000 / n,
	}
	res.report(b)
	b.ReportMetric(r.serverCPU, "server-cpu-µs/req")
	b.ReportMetric(r.clientCPU, "client-cpu-µs/req")
	b.ReportMetric(r.reads, "server-reads/req")
	b.ReportMetric(r.writes, "server-writes/req")
	return r
}

// variantSummary is a table of each variant's medians over the rounds,
// and its ratios to the first variant computed within each round, then
// their median.
func variantSummary(runs map[int]map[string]map[int]variantRun, clients []int, variants []variant) string {
	var sb strings.Builder
	sb.WriteString("| clients | variant | req/s | p99 µs | server CPU µs/req | client CPU µs/req | server reads / writes a req | client GCs a 1000 req | req/s ratio | server CPU ratio | p99 ratio | rounds |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	med := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	for _, c := range clients {
		base := runs[c][variants[0].name]
		for _, v := range variants {
			var rps, p99, srv, cli, rd, wr, gcs, rRPS, rSrv, rP99 []float64
			for round, r := range runs[c][v.name] {
				rps, p99, srv, cli = append(rps, r.perSecond), append(p99, r.p99), append(srv, r.serverCPU), append(cli, r.clientCPU)
				rd, wr, gcs = append(rd, r.reads), append(wr, r.writes), append(gcs, r.clientGCs)
				if b0, ok := base[round]; ok && b0.perSecond > 0 && b0.serverCPU > 0 && b0.p99 > 0 {
					rRPS, rSrv, rP99 = append(rRPS, r.perSecond/b0.perSecond), append(rSrv, r.serverCPU/b0.serverCPU), append(rP99, r.p99/b0.p99)
				}
			}
			fmt.Fprintf(&sb, "| %d | %s | %.0f | %.0f | %.1f | %.1f | %.2f / %.2f | %.2f | %.3f | %.3f | %.3f | %d |\n",
				c, v.name, med(rps), med(p99), med(srv), med(cli), med(rd), med(wr), med(gcs), med(rRPS), med(rSrv), med(rP99), len(rps))
		}
	}
	return sb.String()
}
