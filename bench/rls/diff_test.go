package rls

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// envInt returns the environment variable name as an integer, or def.
func envInt(tb testing.TB, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		tb.Fatalf("%s=%q: %v", name, s, err)
	}
	return n
}

// diffSeed is RLS_DIFF_SEED, or a fresh random seed.
func diffSeed(tb testing.TB) uint64 {
	s := os.Getenv("RLS_DIFF_SEED")
	if s == "" {
		return rand.Uint64() >> 1 // printed and parsed back as a plain decimal
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		tb.Fatalf("RLS_DIFF_SEED=%q: %v", s, err)
	}
	return v
}

// rlsClient returns a client of the RLS at addr, closed at tb's cleanup.
func rlsClient(tb testing.TB, addr string) rlspb.RateLimitServiceClient {
	tb.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return rlspb.NewRateLimitServiceClient(conn)
}

// candidate is a server whose answers are compared with envoy ratelimit's.
type candidate struct {
	name   string
	client rlspb.RateLimitServiceClient
	cmp    *comparer
	diffs  int
}

// TestDifferential sends the same random request stream to envoy ratelimit
// (built at its pinned version, on a real redis-server) and to actorlimitd
// on the embedded table and on Redis (its own redis-server), all reading the
// same random configuration, and requires every answer to be the same
// (comparer says how, and what it leaves out when a window starts while a
// request is on its way): with their defaults, and with the RateLimit-*
// response headers asked for (LIMIT_RESPONSE_HEADERS_ENABLED,
// -response-headers).
//
// RLS_DIFF_SEED picks the configuration and the first stream (the second's
// seed is 1000 more); without it each run draws a fresh seed, logged at the
// start and named in every difference, so that a failure can be replayed.
// The stream goes to actorlimitd on the embedded table, with -shards 4, on
// Redis (with the fixed window's script, and with a key per window,
// -redis-window-keys, as envoy ratelimit keeps them) and, unless -short, as a cluster of three processes in Owner mode
// (the requests dealt round the members), each of which must answer as envoy
// ratelimit does.
// RLS_DIFF_REQUESTS (default 2000) the length of the first stream (the
// second is a third of it). RLS_DIFF_SELF=1 adds a second envoy ratelimit,
// on a third redis-server, as a candidate: it must agree with the first,
// which checks the comparison itself.
func TestDifferential(t *testing.T) {
	seed := diffSeed(t)
	t.Logf("seed %d (RLS_DIFF_SEED=%d replays this run)", seed, seed)
	n := envInt(t, "RLS_DIFF_REQUESTS", 2000)
	self := os.Getenv("RLS_DIFF_SELF") == "1"
	if !self && !hasActorlimitd() {
		t.Skip("no candidate: this tree has no cmd/actorlimitd yet (RLS_DIFF_SELF=1 compares envoy ratelimit with itself)")
	}
	for _, v := range []struct {
		name     string
		envoyEnv []string
		flags    []string
		seed     uint64
		n        int
	}{
		{"defaults", nil, nil, seed, n},
		{"response-headers", []string{"LIMIT_RESPONSE_HEADERS_ENABLED=true"}, []string{"-response-headers"}, seed + 1000, n / 3},
	} {
		t.Run(v.name, func(t *testing.T) {
			differential(t, v.seed, v.n, self, envoyOptions{Env: v.envoyEnv}, v.flags)
		})
	}
	if t.Failed() {
		t.Logf("RLS_DIFF_SEED=%d replays this run", seed)
	}
}

// differential runs one stream of n requests drawn from seed: envoy
// ratelimit with o against actorlimitd with flags (and, with self, a second
// envoy ratelimit).
func differential(t *testing.T, seed uint64, n int, self bool, o envoyOptions, flags []string) {
	g := newGen(seed)
	files := map[string]string{}
	for i := range 5 {
		d := g.domain(fmt.Sprintf("domain%d", i))
		files[d.Name+".yaml"] = d.yaml()
	}
	cfg := writeConfig(t, files)

	ref := rlsClient(t, startEnvoy(t, cfg, startRedis(t).Addr, o))
	var cands []*candidate
	add := func(name, addr string) {
		cands = append(cands, &candidate{name: name, client: rlsClient(t, addr), cmp: newComparer()})
	}
	if self {
		add("envoy ratelimit (a second one)", startEnvoy(t, cfg, startRedis(t).Addr, o))
	}
	if hasActorlimitd() {
		add("actorlimitd (embedded)", startActorlimitd(t, cfg, "", flags...))
		add("actorlimitd (-shards 4)", startActorlimitd(t, cfg, "", append([]string{"-shards", "4"}, flags...)...))
		add("actorlimitd (-redis)", startActorlimitd(t, cfg, startRedis(t).Addr, flags...))
		add("actorlimitd (-redis -redis-window-keys)", startActorlimitd(t, cfg, startRedis(t).Addr, append([]string{"-redis-window-keys"}, flags...)...))
		add("actorlimitd (envoy ratelimit's environment, no flags)", startActorlimitdEnv(t, cfg, startRedis(t).Addr, o))
		if !testing.Short() {
			cands = append(cands, &candidate{name: "actorlimitd (a cluster of three, owner mode)",
				client: roundRobin(rlsClients(t, startActorlimitdCluster(t, cfg, 3, flags...))), cmp: newComparer()})
		}
	}

	history := map[string][]int{} // domain and entries -> the requests that named them
	var reqs []*rlspb.RateLimitRequest
	const shown = 15 // differences shown in full, per candidate
	for i := range n {
		req := g.request()
		reqs = append(reqs, req)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		from := time.Now().Unix()
		refResp, refErr := ref.ShouldRateLimit(ctx, req)
		if refErr != nil {
			cancel()
			t.Fatalf("request #%d to envoy ratelimit: %v\n%s", i, refErr, text(req))
		}
		resps := make([]*rlspb.RateLimitResponse, len(cands))
		errs := make([]error, len(cands))
		for j, c := range cands {
			resps[j], errs[j] = c.client.ShouldRateLimit(ctx, req)
		}
		tm := timing{From: from, To: time.Now().Unix()}
		cancel()
		for j, c := range cands {
			diffs := c.cmp.compare(req, tm, refResp, resps[j], refErr, errs[j])
			if len(diffs) == 0 {
				continue
			}
			c.diffs++
			if c.diffs <= shown {
				t.Errorf("%s differs from envoy ratelimit at request #%d (seed %d):\n  request: %s\n  %s\n  envoy ratelimit: %s\n  %s: %s%s",
					c.name, i, seed, text(req), strings.Join(diffs, "\n  "), text(refResp), c.name, respText(resps[j], errs[j]),
					earlier(reqs, history, req))
			}
		}
		for _, d := range req.GetDescriptors() {
			k := counterKey(req.GetDomain(), d, 0)
			history[k] = append(history[k], i)
		}
	}
	for _, c := range cands {
		t.Logf("%s: %d requests, %d statuses compared (%v), %d left out (a window started on the way), %d requests differ",
			c.name, n, c.cmp.Compared, c.cmp.Kinds, c.cmp.Skipped, c.diffs)
		for _, k := range []string{"over", "ok", "unlimited", "no-limit"} {
			if c.cmp.Kinds[k] == 0 && n >= 1000 {
				t.Errorf("%s: no status of kind %s among %d: the stream misses a case", c.name, k, c.cmp.Compared)
			}
		}
		if c.cmp.Skipped*20 > c.cmp.Compared {
			t.Errorf("%s: %d statuses left out of %d: too many for the comparison to mean much", c.name, c.cmp.Skipped, c.cmp.Compared)
		}
	}
	if t.Failed() {
		names := make([]string, 0, len(files))
		for name := range files {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			t.Logf("configuration %s:\n%s", name, files[name])
		}
	}
}

// earlier lists, for a difference's report, the earlier requests that named
// the same descriptors (the last eight of each).
func earlier(reqs []*rlspb.RateLimitRequest, history map[string][]int, req *rlspb.RateLimitRequest) string {
	seen := map[int]bool{}
	var idx []int
	for _, d := range req.GetDescriptors() {
		h := history[counterKey(req.GetDomain(), d, 0)]
		if len(h) > 8 {
			h = h[len(h)-8:]
		}
		for _, i := range h {
			if !seen[i] {
				seen[i] = true
				idx = append(idx, i)
			}
		}
	}
	if len(idx) == 0 {
		return "\n  no earlier request named these descriptors"
	}
	sort.Ints(idx)
	var b strings.Builder
	b.WriteString("\n  earlier requests naming these descriptors:")
	for _, i := range idx {
		fmt.Fprintf(&b, "\n    #%d %s", i, text(reqs[i]))
	}
	return b.String()
}

func respText(r *rlspb.RateLimitResponse, err error) string {
	if err != nil {
		return "error " + err.Error()
	}
	return text(r)
}
