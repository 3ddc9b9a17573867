// Package bench measures actorlimit against the alternatives a Go user
// would pick. It is a module of its own, so that whatever it compares
// against never enters the library's go.mod.
//
// # The implementations
//
// Each sits behind one small adapter in peers_test.go that counts one hit
// for an id and says whether it was allowed:
//
//   - actorlimit: Limiter.CheckRate, one call per hit.
//   - actorlimit-batch: Limiter.HitMany, 64 hits per call.
//   - x-time-rate: golang.org/x/time/rate, one Limiter per key in a sync.Map.
//   - mutex-map: a fixed window in a map behind a sync.Mutex (mutex.go).
//   - go-limiter: github.com/sethvargo/go-limiter's memorystore.
//   - ulule-limiter: github.com/ulule/limiter/v3 with its memory store.
//   - mutex-btree: a fixed window in a google/btree behind a sync.Mutex.
//   - throttled: github.com/throttled/throttled/v2 GCRA over its memstore
//     (no key bound: a plain map; compare-and-swap retried without limit).
//
// They all do the same work: a window of one hour, or the nearest thing the
// peer has (a token bucket that holds and refills an hour's hits, GCRA with
// an hour's burst), that allows 2^40 hits, so no hit is ever denied; every
// benchmark checks that none is. All of them read the wall clock.
//
// # The benchmarks
//
// BenchmarkLimiters/impl=<name>/keys=<n>/callers=<c> measures one hit, with
// keys of 1, 10 000 and (BENCH_FULL=1) 1 000 000 ids, each hit once before
// the timer starts; callers 2 and 256 are goroutines of b.RunParallel,
// SetParallelism(c/GOMAXPROCS). Each implementation is built once per key set
// and shared by its callers sub-benchmarks. For actorlimit-batch b.N counts
// hits too: each caller queues one hit per iteration and sends its queue
// when 64 are in, so ns/op and allocs/op are per hit.
//
// BenchmarkMemory/impl=<name>/keys=<n> reports "B/key": the live heap
// (runtime.MemStats.HeapAlloc after two GCs) grown by hitting every key of
// 100 000 (and, with BENCH_FULL=1, 1 000 000) once, divided by the keys,
// read once the empty implementation is built; "empty-B" is what it held
// then. The ids are made before any reading, so nobody is charged for them.
// BenchmarkMemoryID16/impl=<name>/keys=<n> is the same for actorlimit and
// mutex-btree with ids of 16 bytes ("user-00000012345", added in order),
// the longest id a fixed-window key of actorlimit holds in its node.
//
// BenchmarkSweepUnderLoad/keys=<n>/callers=<c> fills a limiter on a clock
// moved by hand and read without a lock (a lock in the clock would be a
// second lock the callers queue on) with 100 000 entries (1 000 000 with
// BENCH_FULL=1), a tenth of them in one-second windows that the clock then
// leaves behind, and runs
// Limiter.Sweep, which must delete exactly that tenth, while c goroutines
// call CheckRate on the live keys without pause. It reports the p50, p99 and
// p99.9 of the latencies of the calls made during the sweep ("p50-ns",
// "p99-ns", "p999-ns"; "calls" is how many) and the sweep's time
// ("sweep-ms").
//
// BenchmarkNoSweep/impl=<name>/keys=<n>/callers=<c> is its baseline in the
// same harness: the same table and callers, every call's latency recorded
// for 400 ms an iteration with no sweep, for actorlimit (the benchmark's
// limiter) and for a sync.Mutex around a google/btree on the same clock.
// With 256 callers always calling on two cores, a p99.9 is about the time
// the Go scheduler takes to let every caller run once, whatever the
// limiter: compare it within one run.
//
// BenchmarkTail/impl=<name>/callers=<c> (tail_test.go) is the baseline of
// those percentiles: the same calls, timed the same way, with no sweep, on
// as many keys (100 000, 1 000 000 with BENCH_FULL=1), through actorlimit
// (frozen clock) and the two mutex
// versions; at 256 callers a peer's tail is what the machine and the Go
// scheduler add.
//
// BenchmarkScaling/impl=<name>/procs=<p>/callers=<c> (procs_test.go) sets
// GOMAXPROCS to p, 1, 2 and all the cores, for the sub-benchmark (the -N
// suffix of the name is the GOMAXPROCS the binary started with, not p),
// builds and fills the implementation anew on 10 000 keys, and measures as
// BenchmarkLimiters does, reporting "checks/s" (b.N over the elapsed time)
// beside ns/op: how the checks a second grow with the cores. impl=actorlimit
// is one limiter actor, impl=actorlimit-shards WithShards(p); beside them
// x-time-rate, go-limiter, mutex-map and mutex-btree.
//
// BenchmarkCheckRate (checkrate_test.go) is the earlier comparison with the
// two mutex versions on a frozen clock.
//
// # HTTP middleware
//
// BenchmarkMiddleware/impl=<name>/keys=<n>/callers=<c> (http_test.go)
// measures one request through a middleware with one limit per client IP,
// never reached (2^40 an hour), around the same handler
// (internal/httpbench.Handler: 200 and a 6-byte body):
//
//   - bare: the handler alone.
//   - actorlimit: httpadapter with one block rule grouped by "ip" (a fixed
//     window of an hour).
//   - go-limiter: httplimit over its memorystore, keyed by
//     httplimit.IPKeyFunc().
//   - ulule: ulule/limiter's drivers/middleware/stdlib over its memory store
//     (a fixed window of an hour), with its default key, the client IP.
//   - tollbooth: didip/tollbooth v7 (the latest major version on the module
//     proxy) LimitHandler, a token bucket holding the hour's requests and
//     refilling them in an hour, with its IP lookups narrowed to RemoteAddr
//     and the path left out of its key (by default it believes
//     X-Forwarded-For and X-Real-IP from anyone, and keys by IP and path).
//
// Each takes the client IP from RemoteAddr and believes no forwarding
// header; TestMiddlewarePeersLimit checks that each refuses the third
// request from one IP with 429 when the limit is 2 an hour, whatever its
// port or X-Forwarded-For, and lets another IP through. The requests go to
// handler.ServeHTTP with no network, from keys client IPs (1 and 10 000,
// each seen once before the timer starts), by one caller (a loop; callers=1)
// and by 2 and 256 goroutines of b.RunParallel. Each caller reuses one
// request, whose RemoteAddr it sets, and one httptest.NewRecorder, reset
// before each request. The recorder copies the header map when the status is
// written (http.Header.Clone): one allocation with no header (bare), three
// with any, so every middleware, all of which set headers, is charged two
// allocations more than bare for that copy; its own are its allocs/op minus
// three.
//
// wrk.sh measures a whole server instead: cmd/httpserver serves the same
// handler on loopback, with actorlimit's middleware (-limit=actorlimit) or
// without (-limit=none), driven by wrk; it writes results/wrk.md.
//
// # Redis
//
// redis_test.go starts one local redis-server (internal/redistest) and
// compares the Redis store with go-redis/redis_rate and ulule/limiter's
// Redis store:
//
//   - BenchmarkRedis/callers=<c>/impl=<name>: one always-allowed GCRA hit
//     on one of 1000 keys at 1, 16, 64 and 256 callers; impl=actorlimit runs
//     four limiter actors on one shared redisstore.Store (four pipelines in
//     flight), impl=actorlimit-1shard one; impl=<name>-busypoll is the same
//     on a client whose connections poll for the reply (redisstore/busypoll,
//     a 100µs spin), redis_rate's too. Callers come first in the names,
//     so one run alternates the implementations at each caller count. It
//     reports hits/s, p50-µs and p99-µs, from INFO commandstats the client
//     commands and the µs of Redis time per hit, and client-cpu-µs/hit: the
//     CPU time of the test process (the client side: callers, limiter,
//     go-redis, runtime; not redis-server) per hit, from getrusage.
//   - BenchmarkRedisClientPath/impl=<name> (clientpath_test.go): a lone
//     hit's client work alone, with no network and no Redis (a go-redis
//     hook answers each command in place), for actorlimit-1shard and
//     redis_rate; run it under callgrind (ir.sh) for a count that load does
//     not move.
//   - BenchmarkRedisScript/impl=<name>: the µs of Redis time per check of
//     each algorithm's script, and of redis_rate's (INFO commandstats), and
//     how many checks one script call decided (a run of bucket checks is
//     one call).
//   - BenchmarkRedisFlood/impl=<name>: 64 callers, 90% of the hits on 100
//     ids far over their limit, 10% on 10 000 ids under it; hits/s, Redis
//     commands and µs per hit, and the share of denied hits sent to Redis
//     (those the over-limit cache did not answer), with and without the
//     cache (impl=actorlimit-cache) and for redis_rate.
//
// results/redis.md holds a run and the command that made it.
//
// # Rate Limit Service: actorlimitd, envoy ratelimit, gubernator
//
// rls/ (package rls, all in test files) measures and checks actorlimitd,
// the Rate Limit Service of cmd/actorlimitd, against the service it
// replaces. The peers are programs, started on loopback: envoy ratelimit
// (github.com/envoyproxy/ratelimit at v1.4.1-0.20260122083618-3fb702589d36)
// and gubernator (github.com/gubernator-io/gubernator/v2 at v2.13.0), built
// with go install pkg@version on first use into $(go env GOCACHE)/../NAME/
// VERSION and kept there (so neither enters any go.mod); actorlimitd built
// from ../cmd/actorlimitd (RLS_ACTORLIMITD names another binary); the floor,
// cmd/rlsfloor, a gRPC server that answers every ShouldRateLimit OK without
// deciding anything; real redis-servers (internal/redistest). envoy
// ratelimit runs with its defaults but for loopback listeners, Redis over
// TCP, RUNTIME_ROOT holding ratelimit/config/*.yaml (RUNTIME_WATCH_ROOT
// false) and USE_STATSD=false.
//
// TestDifferential sends the same random request stream to envoy
// ratelimit and to actorlimitd on the embedded table and on Redis, all on
// the same random configuration (five domains: nested descriptors, values,
// wildcards, keys alone, every unit, requests_per_unit 0, unlimited, names,
// replaces, shadow_mode; requests with unknown domains and keys, one to four
// descriptors, repeated descriptors, hits_addend of the request and of each
// descriptor, 0 included, limit overrides), and compares every answer
// exactly: overall_code, each status's code, current_limit with its name,
// limit_remaining and duration_until_reset, and every other field. Both read
// the real clock and count in windows aligned to the epoch; a status whose
// window started while the request went from one server to the next is left
// out, and its counter until that window ends (rls/compare_test.go says
// how; RLS_DIFF_SELF=1 adds a second envoy ratelimit as a candidate, which
// must agree with the first). It runs with the defaults, then with the
// RateLimit-* headers asked for (LIMIT_RESPONSE_HEADERS_ENABLED,
// -response-headers). Each run draws a fresh seed, logged and named in
// every difference; RLS_DIFF_SEED replays one and RLS_DIFF_REQUESTS sets the
// stream's length. Besides actorlimitd on the embedded table and on Redis,
// the stream goes to one with -shards 4 and (unless -short) to a cluster of
// three in Owner mode, the requests dealt round the members. TestDifferentialCases holds short sequences of the differences
// found. The first run builds envoy ratelimit (under a minute on two idle
// cores); then both take about 30 s in CI.
//
// BenchmarkRLS/descriptors=<d>/clients=<c>/impl=<name> measures
// ShouldRateLimit (gubernator: GetRateLimits with the same limits, its
// messages encoded from its proto's field numbers in rls/gubernator_test.go)
// with 1 and 3 descriptors a request (the client's; the client's, the
// path's, the client's and path's, over 10 000 clients and 100 paths, limits
// never reached) at 1, 16, 64 and 256 clients, each a goroutine with its own
// gRPC connection in a closed loop: req/s, p50-µs, p99-µs, the server
// process's CPU a request (server-cpu-µs/req, from /proc), and for a server
// on Redis the commands Redis ran per request (redis-cmds/req, INFO
// commandstats). impl is floor, floor-codec (rlsfloor -codec service:
// actorlimitd's codec), floor-direct (rlsfloor -grpc-transport direct:
// actorlimitd's own HTTP/2 transport), actorlimitd (embedded table),
// actorlimitd-redis, actorlimitd-direct and actorlimitd-redis-direct (the
// same with -grpc-transport direct, and on Redis -redis-window-keys),
// envoy-ratelimit (the same redis-server) and gubernator. BenchmarkRLSFlood/impl=<name> sends 64 clients' requests for
// one key over its limit and reports the Redis commands per denied request:
// actorlimitd-redis without and with its over-limit cache
// (actorlimitd-redis-cache: -redis-denied-cache=1s), envoy ratelimit
// without and with its local cache (LOCAL_CACHE_SIZE_IN_BYTES). envoy ratelimit and
// gubernator run only with BENCH_RLS_PEERS=1 (envoy ratelimit alone with
// BENCH_RLS_PEERS=envoy); without it (CI's
// -benchtime=1x) the benchmarks run the floor and actorlimitd.
//
// BENCH_RLS_ROUNDS=N runs BenchmarkRLS's cases in N alternating rounds
// (round, descriptors, clients, impl: each server's runs between the
// others'; Go names the repeats #01, #02, ...). rls.sh [ROUNDS] [BENCHTIME]
// [FILTER] runs both with the peers in ROUNDS rounds (default 5, 1s a
// case) and writes results/rls.md (cmd/rlsreport: medians, and the ratios
// the report checks computed within each round, then their median, which
// cancels the machine's slow drift) beside the raw output. The issue's
// measurement, 1, 16 and 64 clients, about 4 minutes:
//
//	BENCH_RLS_PEERS=envoy bench/rls.sh 4 1s '^BenchmarkRLS$/./clients=(1|16|64)$/'
//
// BenchmarkRLSVariants/clients=<n>/variant=<name> is an A/B of server
// settings: BENCH_RLS_VARIANTS='base=;window=-grpc-window-bytes=65536;floor='
// starts actorlimitd with each variant's flags (a name starting with floor:
// rlsfloor), runs them in BENCH_RLS_ROUNDS alternating rounds at
// BENCH_RLS_CLIENTS (16,64) and prints each variant's medians and its
// ratios to the first within rounds, with the server's read and write
// system calls a request. BENCH_RLS_CLIENT_WINDOW=65536 gives both
// benchmarks' clients fixed windows: no PINGs of their own, as Envoy.
//
// Both report client-gcs/kreq, the collections the benchmark's own process
// (the clients) ran a thousand requests. The grpc-go clients allocate
// about 80 times a request, so their process collects every 2 000 requests
// or so at 16 clients; on two cores each collection stalls every call in
// flight for 1 to 7 ms, and at 16 clients those calls are the slowest 1%:
// the p99 is then the clients' collector's, the same for every server
// (results/service.md, 2 December 12:25 UTC, has the evidence).
// BENCH_RLS_CLIENT_GOGC=off (or a percentage) collects before each run
// and times it with that GOGC, Go's default again after it: a client with
// no collector, as Envoy, whose p99 is then the servers' and the
// machine's. Each run's requests are then kept in memory, about 5 KB each.
//
// # Running them
//
// The default set, which CI runs once (-benchtime=1x) in well under two
// minutes:
//
//	cd bench && go test -run='^$' -bench=. -count=10 | tee new.txt && benchstat new.txt
//
// BENCH_FULL=1 adds the 1 000 000-key sets; setting them up takes minutes.
// BENCH_SHARDS=n starts impl=actorlimit and impl=actorlimit-batch (and
// BenchmarkMiddleware's impl=actorlimit) with WithShards(n) instead of the
// library's default.
//
// report.sh [COUNT] runs the comparison COUNT times (default 10), in
// rounds for BenchmarkLimiters and BenchmarkScaling (each implementation
// once a round, so that a shared machine's load weighs alike on all), and
// writes results/limiters.md: the machine, then median ns/op and allocs/op
// with the ratio to the fastest peer, actorlimit's ratios to mutex-btree,
// mutex-map and the fastest peer against its targets, checks per second at
// each GOMAXPROCS, the same for the HTTP middlewares ("HTTP
// middleware, one rule"; the ratio is to the cheapest peer, bare excluded),
// bytes per key, and the latencies during a sweep. wrk.sh [ROUNDS] writes
// results/wrk.md. profile.sh writes CPU and allocation profiles of
// BenchmarkLimiters/impl=actorlimit/keys=10000/callers=256 to results/ and
// prints their top entries. ir.sh BENCH [N] counts the instructions of one
// op of a benchmark with valgrind's callgrind (the runs of N and 2N ops,
// their difference over N) and the functions they go to: a count is the
// same on a loaded machine, where times are not, but it is no time (a
// cache miss is one instruction).
package bench
