package rls

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// benchConfig is the benchmarks' configuration, the same for every RLS: a
// limit per client, per client and path, and per path under /api (a
// wildcard), none of them ever reached (10^9 an hour), and the flood's
// limit, 10 an hour per value. gubernator gets the same limits through its
// own API (guberLimits).
const benchConfig = `domain: bench
descriptors:
  - key: client
    rate_limit:
      unit: hour
      requests_per_unit: 1000000000
    descriptors:
      - key: path
        rate_limit:
          unit: hour
          requests_per_unit: 1000000000
  - key: path
    value: "/api*"
    rate_limit:
      unit: hour
      requests_per_unit: 1000000000
  - key: flood
    rate_limit:
      unit: hour
      requests_per_unit: 10
`

const (
	benchClients = 10000 // client ids the requests draw from
	benchPaths   = 100   // paths under /api
	floodLimit   = 10    // the flood key's limit an hour
)

// peersWanted reports whether the benchmarks run envoy ratelimit and
// gubernator, which are built from their modules on first use:
// BENCH_RLS_PEERS=1 asks for them (rls.sh sets it).
func peersWanted() bool { return os.Getenv("BENCH_RLS_PEERS") == "1" }

// envoyWanted reports whether BenchmarkRLS runs envoy ratelimit: with the
// other peers, or alone with BENCH_RLS_PEERS=envoy.
func envoyWanted() bool { return peersWanted() || os.Getenv("BENCH_RLS_PEERS") == "envoy" }

// rlsImpl is one server that the benchmarks measure.
type rlsImpl struct {
	name  string
	addr  string
	guber bool              // gubernator's API instead of the RLS protocol
	redis *redis.Client     // the redis-server it uses, if any, for INFO commandstats
	dial  []grpc.DialOption // more options for its connections
	conns []*grpc.ClientConn
}

// conn returns the impl's i-th connection, dialled on first use and kept
// for every sub-benchmark (closed at b's cleanup).
func (im *rlsImpl) conn(b *testing.B, i int) *grpc.ClientConn {
	for len(im.conns) <= i {
		opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, im.dial...)
		if im.guber {
			opts = append(opts, grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
		}
		c, err := grpc.NewClient(im.addr, opts...)
		if err != nil {
			b.Fatal(err)
		}
		im.conns = append(im.conns, c)
	}
	return im.conns[i]
}

func (im *rlsImpl) close() {
	for _, c := range im.conns {
		_ = c.Close()
	}
}

// workers returns n workers sending requests of d descriptors (1: the
// client's; 3: the client's, the path's and the client's and path's),
// each drawing from 1024 requests made beforehand.
func (im *rlsImpl) workers(b *testing.B, n, d int) []call {
	out := make([]call, n)
	for w := range n {
		r := rand.New(rand.NewPCG(uint64(w), 7))
		var reqs [1024]func(ctx context.Context) error
		for i := range reqs {
			client, path := "c"+strconv.Itoa(r.IntN(benchClients)), "/api/p"+strconv.Itoa(r.IntN(benchPaths))
			reqs[i] = im.request(b, w, d, client, path)
		}
		out[w] = func(ctx context.Context, i int) error { return reqs[i&1023](ctx) }
	}
	return out
}

// request returns a call of one request for client and path with d
// descriptors, on connection w.
func (im *rlsImpl) request(b *testing.B, w, d int, client, path string) func(ctx context.Context) error {
	conn := im.conn(b, w)
	if im.guber {
		lim := func(name, key string) guberReq {
			return guberReq{Name: name, Key: key, Hits: 1, Limit: 1e9, Duration: time.Hour}
		}
		reqs := []guberReq{lim("client", client)}
		if d == 3 {
			reqs = append(reqs, lim("path", path), lim("client_path", client+"_"+path))
		}
		return guberCall(conn, reqs)
	}
	entry := func(k, v string) *ratelimitpb.RateLimitDescriptor_Entry {
		return &ratelimitpb.RateLimitDescriptor_Entry{Key: k, Value: v}
	}
	req := &rlspb.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitpb.RateLimitDescriptor{
		{Entries: []*ratelimitpb.RateLimitDescriptor_Entry{entry("client", client)}}}}
	if d == 3 {
		req.Descriptors = append(req.Descriptors,
			&ratelimitpb.RateLimitDescriptor{Entries: []*ratelimitpb.RateLimitDescriptor_Entry{entry("path", path)}},
			&ratelimitpb.RateLimitDescriptor{Entries: []*ratelimitpb.RateLimitDescriptor_Entry{entry("client", client), entry("path", path)}})
	}
	return rlsCall(rlspb.NewRateLimitServiceClient(conn), req, rlspb.RateLimitResponse_OK)
}

// rlsCall returns a call sending req, which fails unless the overall code
// is want and every descriptor has a status.
func rlsCall(c rlspb.RateLimitServiceClient, req *rlspb.RateLimitRequest, want rlspb.RateLimitResponse_Code) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		resp, err := c.ShouldRateLimit(ctx, req)
		if err != nil {
			return err
		}
		if resp.GetOverallCode() != want || len(resp.GetStatuses()) != len(req.GetDescriptors()) {
			return fmt.Errorf("answer %s to %s: want %s", text(resp), text(req), want)
		}
		return nil
	}
}

// guberCall returns a call sending reqs to gubernator, encoded once; it
// fails unless every limit answers under the limit.
func guberCall(conn *grpc.ClientConn, reqs []guberReq) func(ctx context.Context) error {
	c := &guberClient{conn: conn}
	raw := encodeGuber(nil, reqs)
	return func(ctx context.Context) error {
		c.req.b = raw
		if err := c.conn.Invoke(ctx, gubernatorMethod, &c.req, &c.out); err != nil {
			return err
		}
		resps, err := decodeGuber(c.out.b)
		if err != nil {
			return err
		}
		if len(resps) != len(reqs) {
			return fmt.Errorf("gubernator: %d answers to %d limits", len(resps), len(reqs))
		}
		for _, r := range resps {
			if r.Err != "" || r.Over {
				return fmt.Errorf("gubernator: %+v", r)
			}
		}
		return nil
	}
}

// fastFlags are actorlimitd's settings for speed that are not its
// defaults: its own HTTP/2 transport; fastRedisFlags, on Redis, a key per
// fixed window (INCRBY, no script; the daemon's clock).
var (
	fastFlags      = []string{"-grpc-transport", "direct"}
	fastRedisFlags = []string{"-redis-window-keys"}
)

// startImpls starts the servers the benchmarks compare, for b: the floor
// (on grpc-go's codec), the floor on actorlimitd's codec (floor-codec),
// the floor on actorlimitd's own transport (floor-direct), actorlimitd on
// the embedded table and on Redis with its defaults and with fastFlags
// (actorlimitd-direct, actorlimitd-redis-direct), and with
// BENCH_RLS_PEERS=1 envoy ratelimit (on the same redis-server) and
// gubernator; their clients' options are clientDialOptions'.
func startImpls(b *testing.B) []*rlsImpl {
	dial, err := clientDialOptions()
	if err != nil {
		b.Fatal(err)
	}
	cfg := writeConfig(b, map[string]string{"bench.yaml": benchConfig})
	rs := startRedis(b)
	rc := rs.Client()
	impls := []*rlsImpl{{name: "floor", addr: startFloor(b)}, {name: "floor-codec", addr: startFloor(b, "-codec", "service")},
		{name: "floor-direct", addr: startFloor(b, "-grpc-transport", "direct")}}
	if hasActorlimitd() {
		impls = append(impls,
			&rlsImpl{name: "actorlimitd", addr: startActorlimitd(b, cfg, "")},
			&rlsImpl{name: "actorlimitd-redis", addr: startActorlimitd(b, cfg, rs.Addr), redis: rc},
			&rlsImpl{name: "actorlimitd-direct", addr: startActorlimitd(b, cfg, "", fastFlags...)},
			&rlsImpl{name: "actorlimitd-redis-direct", addr: startActorlimitd(b, cfg, rs.Addr, append(fastFlags, fastRedisFlags...)...), redis: rc})
	}
	if envoyWanted() {
		impls = append(impls, &rlsImpl{name: "envoy-ratelimit", addr: startEnvoy(b, cfg, rs.Addr, envoyOptions{}), redis: rc})
	}
	if peersWanted() {
		impls = append(impls, &rlsImpl{name: "gubernator", addr: startGubernator(b), guber: true})
	}
	for _, im := range impls {
		im.dial = dial
	}
	b.Cleanup(func() {
		for _, im := range impls {
			im.close()
		}
	})
	return impls
}

// BenchmarkRLS measures ShouldRateLimit (gubernator: GetRateLimits with the
// same limits) at 1, 16, 64 and 256 concurrent clients, each a goroutine
// with its own gRPC connection in a closed loop, with 1 and 3 descriptors a
// request, on every server startImpls starts. It reports req/s, p50-µs and
// p99-µs, the CPU time the server's process spent per request
// (server-cpu-µs/req, from /proc: the figure that a machine shared with
// other work disturbs least; Redis's own CPU is not in it), and for a
// server on Redis the commands Redis ran per request (redis-cmds/req, from
// INFO commandstats).
//
// With BENCH_RLS_ROUNDS=N (N >= 1) every case runs N times, the rounds
// outermost (round, descriptors, clients, impl), so that each server's
// runs alternate with the others' and a slow drift of the machine falls on
// all of them alike: Go names the repeats of a sub-benchmark with #01,
// #02, ..., and cmd/rlsreport reads the round from that suffix. The suffix
// is part of the impl's element of the name: a -bench filter that anchors
// that element with $ runs round 0 alone (write ^impl=floor(#|$)).
// BENCH_RLS_CLIENT_WINDOW=65536 makes the clients send no PINGs of their
// own, as Envoy does (clientDialOptions).
func BenchmarkRLS(b *testing.B) {
	rounds, err := benchRounds()
	if err != nil {
		b.Fatal(err)
	}
	impls := startImpls(b)
	for range rounds {
		for _, d := range []int{1, 3} {
			for _, c := range []int{1, 16, 64, 256} {
				for _, im := range impls {
					b.Run(fmt.Sprintf("descriptors=%d/clients=%d/impl=%s", d, c, im.name), func(b *testing.B) {
						measureRLS(b, im, c, d)
					})
				}
			}
		}
	}
}

// benchRounds is BENCH_RLS_ROUNDS, 1 when it is not set.
func benchRounds() (int, error) {
	s := os.Getenv("BENCH_RLS_ROUNDS")
	if s == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("BENCH_RLS_ROUNDS=%q: want a whole number of rounds, at least 1", s)
	}
	return n, nil
}

// measureRLS runs b's requests on im from c clients with d descriptors a
// request, and reports BenchmarkRLS's metrics.
func measureRLS(b *testing.B, im *rlsImpl, c, d int) {
	b.ReportAllocs()
	workers := im.workers(b, c, d)
	var cpu0 time.Duration
	res := runLoad(b, b.N, workers, func() {
		resetStats(b, im.redis)
		cpu0, _ = serverCPU(im.addr)
	})
	res.report(b)
	if cpu1, ok := serverCPU(im.addr); ok {
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1e3/float64(b.N), "server-cpu-µs/req")
	}
	if im.redis != nil {
		b.ReportMetric(redisCommands(b, im.redis)/float64(b.N), "redis-cmds/req")
	}
}

// BenchmarkRLSFlood sends 64 clients' requests for one descriptor, whose
// limit (10 an hour) the first requests use up: nearly every request is
// denied. It reports req/s, p99-µs, the share of requests denied, and the
// commands Redis ran per denied request (redis-cmds/denied): what a flood
// costs Redis with the local over-limit cache (actorlimitd-redis-cache:
// -redis-denied-cache=1s; envoy-ratelimit-cache: envoy ratelimit with
// LOCAL_CACHE_SIZE_IN_BYTES) and without it (actorlimitd-redis,
// envoy-ratelimit).
func BenchmarkRLSFlood(b *testing.B) {
	if !hasActorlimitd() && !peersWanted() {
		b.Skip("nothing to flood: no cmd/actorlimitd in this tree, and BENCH_RLS_PEERS is not 1")
	}
	cfg := writeConfig(b, map[string]string{"bench.yaml": benchConfig})
	rs := startRedis(b)
	rc := rs.Client()
	var impls []*rlsImpl
	if hasActorlimitd() {
		impls = append(impls,
			&rlsImpl{name: "actorlimitd-redis", addr: startActorlimitd(b, cfg, rs.Addr), redis: rc},
			&rlsImpl{name: "actorlimitd-redis-cache", addr: startActorlimitd(b, cfg, rs.Addr, actorlimitdCacheFlags...), redis: rc})
	}
	if peersWanted() {
		impls = append(impls,
			&rlsImpl{name: "envoy-ratelimit", addr: startEnvoy(b, cfg, rs.Addr, envoyOptions{}), redis: rc},
			&rlsImpl{name: "envoy-ratelimit-cache", addr: startEnvoy(b, cfg, rs.Addr, envoyOptions{LocalCacheBytes: 1 << 20}), redis: rc})
	}
	b.Cleanup(func() {
		for _, im := range impls {
			im.close()
		}
	})
	for _, im := range impls {
		b.Run("impl="+im.name, func(b *testing.B) {
			b.ReportAllocs()
			// a flood key of its own per impl and run: its first 10
			// requests are allowed, the rest denied
			key := im.name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			req := &rlspb.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitpb.RateLimitDescriptor{
				{Entries: []*ratelimitpb.RateLimitDescriptor_Entry{{Key: "flood", Value: key}}}}}
			workers := make([]call, 64)
			over := make([]int, len(workers)) // denied requests, per worker
			for w := range workers {
				c := rlspb.NewRateLimitServiceClient(im.conn(b, w))
				workers[w] = func(ctx context.Context, i int) error {
					resp, err := c.ShouldRateLimit(ctx, req)
					if err != nil {
						return err
					}
					if i >= 0 && resp.GetOverallCode() == rlspb.RateLimitResponse_OVER_LIMIT {
						over[w]++
					}
					return nil
				}
			}
			res := runLoad(b, b.N, workers, func() { resetStats(b, im.redis) })
			n := 0
			for _, o := range over {
				n += o
			}
			res.report(b)
			b.ReportMetric(float64(n)/float64(b.N), "denied/req")
			if n > 0 {
				b.ReportMetric(redisCommands(b, im.redis)/float64(n), "redis-cmds/denied")
			}
		})
	}
}

// actorlimitdCacheFlags turn on actorlimitd's local over-limit cache for
// BenchmarkRLSFlood.
var actorlimitdCacheFlags = []string{"-redis-denied-cache=1s"}

// resetStats empties Redis's INFO commandstats (CONFIG RESETSTAT); nothing
// for a nil client.
func resetStats(b *testing.B, c *redis.Client) {
	if c == nil {
		return
	}
	if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
}

// redisCommands returns the commands Redis ran for clients since the last
// resetStats, leaving out the benchmark's own (INFO, CONFIG) and, when
// scripts ran, the commands they called (Redis counts those in their own
// entries as well as in the script's).
func redisCommands(b *testing.B, c *redis.Client) float64 {
	s, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	calls := map[string]float64{}
	for _, line := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if k, v, _ := strings.Cut(kv, "="); k == "calls" {
				f, _ := strconv.ParseFloat(v, 64)
				calls[strings.TrimPrefix(name, "cmdstat_")] = f
			}
		}
	}
	delete(calls, "info")
	delete(calls, "config|resetstat")
	if calls["evalsha"]+calls["eval"]+calls["fcall"] > 0 {
		var n float64
		for _, k := range []string{"evalsha", "eval", "fcall", "del", "script|load"} {
			n += calls[k]
		}
		return n
	}
	var n float64
	for _, v := range calls {
		n += v
	}
	return n
}
