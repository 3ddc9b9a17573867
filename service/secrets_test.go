package service_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/internal/testkit"
	"github.com/actorlimit/actorlimit/service"
)

const secretConfig = `
domain: web
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: api_key
    value: sk_live_vip
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: authorization
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: token
    secret: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: tenant
    descriptors:
      - key: route
        rate_limit: {unit: minute, requests_per_unit: 2}
`

// TestLongValuesCounted: a value over the bound, or an id over
// MaxStoredID, is counted under its digest, never refused: the decisions
// are those of any value, two values that differ in their last byte count
// apart, the same value together, and the id is at most MaxStoredID bytes.
func TestLongValuesCounted(t *testing.T) {
	f := newFixture(t, secretConfig, service.Options{})
	tests := []struct {
		name string
		desc func(last string) *ratelimitv3.RateLimitDescriptor
	}{
		{"a value just over the bound", func(last string) *ratelimitv3.RateLimitDescriptor {
			return desc("user", strings.Repeat("v", service.DefaultMaxValueLength)+last)
		}},
		{"5000 bytes", func(last string) *ratelimitv3.RateLimitDescriptor {
			return desc("user", strings.Repeat("w", 4999)+last)
		}},
		{"1 MiB", func(last string) *ratelimitv3.RateLimitDescriptor {
			return desc("user", strings.Repeat("x", 1<<20-1)+last)
		}},
		{"short values, a long id", func(last string) *ratelimitv3.RateLimitDescriptor {
			return desc("tenant", strings.Repeat("t", 200), "route", strings.Repeat("r", 200)+last)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := tt.desc("a"), tt.desc("b")
			id, _ := f.srv.IDOf("web", a)
			idB, _ := f.srv.IDOf("web", b)
			assert.LessOrEqual(t, len(id), service.MaxStoredID)
			assert.NotEqual(t, id, idB, "values that differ in their last byte")
			limit := 3
			if a.Entries[0].Key == "tenant" {
				limit = 2
			}
			ask := func(d *ratelimitv3.RateLimitDescriptor) (bool, uint32) {
				t.Helper()
				resp, err := f.srv.ShouldRateLimit(context.Background(), request("web", d))
				require.NoError(t, err)
				return resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT, resp.Statuses[0].LimitRemaining
			}
			for i := range limit {
				over, rem := ask(a)
				assert.False(t, over, "hit %d", i)
				assert.Equal(t, uint32(limit-1-i), rem, "hit %d", i)
			}
			over, _ := ask(a)
			assert.True(t, over, "the same value counts together")
			over, rem := ask(b)
			assert.False(t, over, "another value, another counter")
			assert.Equal(t, uint32(limit-1), rem)
		})
	}
}

// newServer returns a Server on a limiter of its own with cfg, o, and a
// metrics registry with a budget of maxDetailed detailed series.
func newServer(t *testing.T, cfg string, o service.Options, maxDetailed int, lopts ...actorlimit.Option) (*service.Server, *prometheus.Registry) {
	t.Helper()
	clock := testkit.NewClock(start)
	lim, err := actorlimit.Start(append([]actorlimit.Option{actorlimit.WithClock(clock), actorlimit.WithJanitor(0, 0)}, lopts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { lim.Close() })
	reg := prometheus.NewRegistry()
	m, err := service.NewMetrics(reg, maxDetailed)
	require.NoError(t, err)
	c, err := service.Parse(map[string][]byte{"test.yaml": []byte(cfg)})
	require.NoError(t, err)
	o.Limiter, o.Clock, o.Metrics = lim, clock, m
	srv, err := service.New(c, o)
	require.NoError(t, err)
	return srv, reg
}

// labels returns every label value reg holds.
func labels(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				b.WriteString(l.GetValue() + "\n")
			}
		}
	}
	return b.String()
}

// TestSecretsSameDecisions: with the secret keys hashed (the default, and
// a key of the operator's) the answers are those of secret keys off, while
// no id and no label holds a secret value.
func TestSecretsSameDecisions(t *testing.T) {
	off, _ := newServer(t, secretConfig, service.Options{Secrets: service.Secrets{Keys: []string{}}}, 1000)
	onRandom, regRandom := newServer(t, secretConfig, service.Options{}, 1000)
	onKeyed, regKeyed := newServer(t, secretConfig, service.Options{Secrets: service.Secrets{Key: []byte("0123456789abcdef0123")}}, 1000)
	rng := rand.New(rand.NewPCG(1, 2))
	values := []string{"sk_live_vip", "sk_live_a", "sk_live_b", "Bearer sk_live_c", strings.Repeat("sk_live_long", 300)}
	keys := []string{"api_key", "authorization", "token", "user"}
	for i := range 300 {
		var ds []*ratelimitv3.RateLimitDescriptor
		for range 1 + rng.IntN(3) {
			ds = append(ds, desc(keys[rng.IntN(len(keys))], values[rng.IntN(len(values))]))
		}
		req := &rlsv3.RateLimitRequest{Domain: "web", Descriptors: ds, HitsAddend: uint32(rng.IntN(2))}
		want, err := off.ShouldRateLimit(context.Background(), req)
		require.NoError(t, err)
		for _, srv := range []*service.Server{onRandom, onKeyed} {
			got, err := srv.ShouldRateLimit(context.Background(), req)
			require.NoError(t, err)
			require.True(t, proto.Equal(want, got), "request %d %v:\nsecrets off %v\nsecrets on  %v", i, req, want, got)
			for _, d := range ds {
				id, label := srv.IDOf("web", d)
				if d.Entries[0].Key != "user" {
					assert.NotContains(t, id, "sk_live", "request %d", i)
					assert.NotContains(t, label, "sk_live", "request %d", i)
				}
			}
		}
	}
	for _, reg := range []*prometheus.Registry{regRandom, regKeyed} {
		assert.NotContains(t, labels(t, reg), "sk_live")
	}
	id, _ := off.IDOf("web", desc("api_key", "sk_live_a"))
	assert.Contains(t, id, "sk_live_a", "secret keys off: the value as it is, as envoy ratelimit keeps it")
}

// TestSecretKeyRequired: New refuses a Server whose secret values would be
// counted under a key of its process while the counts are shared or kept,
// and a key too short; the Reloader's CheckConfig refuses a configuration
// that marks a key secret in that case.
func TestSecretKeyRequired(t *testing.T) {
	const marked = "domain: m\ndescriptors:\n  - key: token\n    secret: true\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"
	key := []byte("0123456789abcdef")
	tests := []struct {
		name    string
		persist bool
		secrets service.Secrets
		config  string
		err     string
	}{
		{"kept counts, default keys, no key", true, service.Secrets{}, secretConfig, "Secrets.Key is empty while the limiter's counts are shared or kept and 5 descriptor keys are secret"},
		{"kept counts, a key", true, service.Secrets{Key: key}, secretConfig, ""},
		{"kept counts, no secret key", true, service.Secrets{Keys: []string{}}, decisions, ""},
		{"kept counts, no secret key, secret: true", true, service.Secrets{Keys: []string{}}, marked, `domain "m" marks key "token" secret`},
		{"kept counts, a key, secret: true", true, service.Secrets{Key: key, Keys: []string{}}, marked, ""},
		{"counts of this process, no key", false, service.Secrets{}, marked, ""},
		{"a short key", false, service.Secrets{Key: key[:15]}, secretConfig, "Secrets.Key is 15 bytes, fewer than the 16 wanted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []actorlimit.Option
			if tt.persist {
				opts = append(opts, actorlimit.WithPersistence(t.TempDir(), actorlimit.PersistConfig{}))
			}
			lim, err := actorlimit.Start(opts...)
			require.NoError(t, err)
			defer lim.Close()
			assert.Equal(t, tt.persist, lim.SharedCounts())
			c, err := service.Parse(map[string][]byte{"c.yaml": []byte(tt.config)})
			require.NoError(t, err)
			o := service.Options{Limiter: lim, Secrets: tt.secrets}
			_, err = service.New(c, o)
			if tt.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, service.ErrSecretKey)
			assert.Contains(t, err.Error(), tt.err)
			if strings.Contains(tt.err, "marks key") {
				srv, err := service.New(nil, o)
				require.NoError(t, err, "no configuration yet")
				assert.ErrorIs(t, srv.CheckConfig(c), service.ErrSecretKey)
			}
		})
	}
}

// TestRedactedSource: /rlconfig shows the configuration without the values
// of secret descriptors.
func TestRedactedSource(t *testing.T) {
	srv, _ := newServer(t, secretConfig+"  - key: token\n    value: tok_in_the_file\n    rate_limit: {unit: minute, requests_per_unit: 9}\n", service.Options{}, 10)
	rec := httptest.NewRecorder()
	service.ConfigHandler(srv).ServeHTTP(rec, httptest.NewRequest("GET", "/rlconfig", nil))
	body := rec.Body.String()
	assert.NotContains(t, body, "sk_live_vip")
	assert.NotContains(t, body, "tok_in_the_file", "secret: true in the file")
	assert.Contains(t, body, "value: "+service.Redacted)
	assert.Contains(t, body, "# test.yaml\n")
	assert.Contains(t, body, "requests_per_unit: 5", "the rest is kept")
	assert.Contains(t, string(srv.Config().RedactedSource([]string{})), "sk_live_vip", "secret keys off")
	c, err := service.Parse(map[string][]byte{"plain.yaml": []byte(decisions)})
	require.NoError(t, err)
	assert.Equal(t, string(c.Source()), string(c.RedactedSource(nil)), "a file with nothing to redact is served as it is")
	assert.NotContains(t, string(srv.Config().RedactedSource([]string{})), "value: tok_in_the_file")
}

// TestDetailedBudgetKeepsBusiest: a client that sends a thousand values
// once each before the busy ones come, and keeps sending new ones, does
// not keep the busy values out of the detailed series.
func TestDetailedBudgetKeepsBusiest(t *testing.T) {
	cfg := "domain: web\ndescriptors:\n  - key: who\n    detailed_metric: true\n    rate_limit: {unit: minute, requests_per_unit: 1000000}\n"
	srv, reg := newServer(t, cfg, service.Options{}, 10)
	ask := func(v string) {
		t.Helper()
		_, err := srv.ShouldRateLimit(context.Background(), request("web", desc("who", v)))
		require.NoError(t, err)
	}
	n := 0
	for range 1000 {
		ask(fmt.Sprintf("flood%d", n))
		n++
	}
	busy := []string{"alice", "bob", "carol", "dave", "erin"}
	for range 300 {
		for _, v := range busy {
			ask(v)
		}
		for range 2 {
			ask(fmt.Sprintf("flood%d", n))
			n++
		}
	}
	for _, v := range busy {
		assert.GreaterOrEqual(t, testutil.ToFloat64(mustVec(t, reg, "actorlimitd_hits_total", "who_"+v)), 250.0, v)
	}
	count, err := testutil.GatherAndCount(reg, "actorlimitd_hits_total")
	require.NoError(t, err)
	assert.Equal(t, 10, count, "the budget")
}

// TestMaxHitsAddend: a hits_addend over the bound is counted as the bound,
// never refused.
func TestMaxHitsAddend(t *testing.T) {
	for _, bound := range []uint64{0, 2} {
		srv, reg := newServer(t, secretConfig, service.Options{MaxHitsAddend: bound}, 10)
		resp, err := srv.ShouldRateLimit(context.Background(), request("web", withHits(desc("user", "x"), math.MaxUint64)))
		require.NoError(t, err)
		resp2, err := srv.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "web", HitsAddend: 1000,
			Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("user", "y")}})
		require.NoError(t, err)
		clamped, err := testutil.GatherAndCount(reg, "actorlimitd_hits_addend_clamped_total")
		require.NoError(t, err)
		if bound == 0 {
			assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.OverallCode)
			assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp2.OverallCode)
			continue
		}
		assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.OverallCode, "2 hits of 3")
		assert.Equal(t, uint32(1), resp.Statuses[0].LimitRemaining)
		assert.Equal(t, uint32(1), resp2.Statuses[0].LimitRemaining, "the request's hits_addend too")
		assert.Equal(t, 1, clamped)
	}
}

// TestDetailedBudgetConcurrent: callers that bring new detailed values at
// once keep the series within the budget (run with -race).
func TestDetailedBudgetConcurrent(t *testing.T) {
	cfg := "domain: web\ndescriptors:\n  - key: who\n    detailed_metric: true\n    rate_limit: {unit: minute, requests_per_unit: 1000000}\n"
	srv, reg := newServer(t, cfg, service.Options{}, 10)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				v := fmt.Sprintf("g%d-%d", g, i%40)
				if _, err := srv.ShouldRateLimit(context.Background(), request("web", desc("who", v))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	count, err := testutil.GatherAndCount(reg, "actorlimitd_hits_total")
	require.NoError(t, err)
	assert.LessOrEqual(t, count, 10)
	assert.Positive(t, count)
}

// TestLongValueLabel: a detailed_metric label holds a long value as its
// digest, the same digest for the same value.
func TestLongValueLabel(t *testing.T) {
	cfg := "domain: web\ndescriptors:\n  - key: who\n    detailed_metric: true\n    rate_limit: {unit: minute, requests_per_unit: 10}\n"
	srv, reg := newServer(t, cfg, service.Options{}, 10)
	long := strings.Repeat("l", 5000)
	for range 2 {
		_, err := srv.ShouldRateLimit(context.Background(), request("web", desc("who", long)))
		require.NoError(t, err)
	}
	_, label := srv.IDOf("web", desc("who", long))
	assert.Len(t, label, len("who_")+43)
	assert.Equal(t, 2.0, testutil.ToFloat64(mustVec(t, reg, "actorlimitd_hits_total", label)))
	assert.NotContains(t, labels(t, reg), "llll")
	_, short := srv.IDOf("web", desc("who", "short"))
	assert.Equal(t, "who_short", short, "a short value as it is")
}

// TestValueBoundExact: a value of exactly Bounds.ValueLength bytes is kept
// as it is, in the counter's id and a detailed label; one byte more is
// kept as its digest.
func TestValueBoundExact(t *testing.T) {
	cfg := "domain: web\ndescriptors:\n  - key: who\n    detailed_metric: true\n    rate_limit: {unit: minute, requests_per_unit: 10}\n"
	srv, _ := newServer(t, cfg, service.Options{Bounds: service.Bounds{ValueLength: 20}}, 10)
	at := strings.Repeat("a", 20)
	id, label := srv.IDOf("web", desc("who", at))
	assert.Contains(t, id, at, "a value at the bound, in the id as it is")
	assert.Equal(t, "who_"+at, label)
	over := at + "b"
	id, label = srv.IDOf("web", desc("who", over))
	assert.NotContains(t, id, at, "a value past the bound, only as its digest")
	assert.Len(t, label, len("who_")+43)
}
