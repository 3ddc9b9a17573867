package cluster_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
)

// TestHitManyOnMembers: HitMany works unchanged on members: every hit
// from the member's copies, in order, in one call; the members share the
// counts once synced; with the owner gone the batch falls back to the
// member's share instead of failing.
func TestHitManyOnMembers(t *testing.T) {
	d := newDetached(t, 2, newFakeClock())
	ctx := context.Background()
	fixed := actorlimit.Policy{Limit: 3, Period: time.Minute}
	gcra := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 2, Period: time.Minute}
	// One id under two algorithms: two states, in one partition.
	hits := []actorlimit.HitRequest{
		{ID: "a", Policy: fixed}, {ID: "a", Policy: gcra}, {ID: "a", Policy: fixed, N: 2},
		{ID: "a", Policy: gcra}, {ID: "a", Policy: gcra}, {ID: "a", Policy: fixed},
	}
	res := make([]actorlimit.Result, len(hits))
	require.NoError(t, d.members[0].Limiter.HitMany(ctx, hits, res))
	wantAllowed := []bool{true, true, true, true, false, false}
	wantCount := []int64{1, 1, 3, 2, 2, 4}
	for i := range hits {
		assert.Equal(t, wantAllowed[i], res[i].Allowed, "hit %d (%s)", i, hits[i].ID)
		assert.Equal(t, wantCount[i], res[i].Count, "hit %d (%s)", i, hits[i].ID)
	}
	res = res[:2]
	require.NoError(t, d.members[1].Limiter.HitMany(ctx, []actorlimit.HitRequest{{ID: "a", Policy: fixed}, {ID: "a", Policy: gcra}}, res))
	assert.True(t, res[0].Allowed, "member 1 knows nothing of member 0's hits yet: the inertia")
	assert.True(t, res[1].Allowed)
	d.syncAll()
	d.syncAll()
	require.NoError(t, d.members[1].Limiter.HitMany(ctx, []actorlimit.HitRequest{{ID: "a", Policy: fixed}, {ID: "a", Policy: gcra}}, res))
	assert.False(t, res[0].Allowed, "member 1 learned member 0's hits")
	assert.False(t, res[1].Allowed)
	assert.Equal(t, []int64{6, 3}, []int64{res[0].Count, res[1].Count})
	err := d.members[1].Limiter.HitMany(ctx, []actorlimit.HitRequest{{ID: "a", Policy: fixed}, {ID: "", Policy: fixed}}, res)
	assert.ErrorIs(t, err, actorlimit.ErrInvalidArgument, "a bad request fails the batch")

	d.down.Store(true)
	for _, m := range d.members {
		m.SetLive(2)
	}
	bucket := actorlimit.Policy{Algorithm: actorlimit.TokenBucket, Limit: 10, Period: time.Minute}
	batch := func(n int) []bool {
		hits := make([]actorlimit.HitRequest, n)
		for i := range hits {
			hits[i] = actorlimit.HitRequest{ID: "t", Policy: bucket}
		}
		res := make([]actorlimit.Result, n)
		require.NoError(t, d.members[1].Limiter.HitMany(ctx, hits, res), "the owner is gone: no error")
		out := make([]bool, n)
		for i := range res {
			out[i] = res[i].Allowed
		}
		return out
	}
	assert.Equal(t, []bool{true, true, true}, batch(3), "no sync has failed yet: the full policy")
	d.members[1].SyncNow() // fails: the partition is cut off
	assert.Equal(t, []bool{true, true, true, true, true, false}, batch(6), "member 1's share, 10/2")
}

// rulesFile is a rules file with a FixedWindow rule and a GCRA rule.
const rulesFile = `rules:
  - name: login
    when:
      - method: [POST]
      - path: {exact: /login}
    group_by: [ip]
    policy: {algorithm: fixed_window, limit: 2, period: 1m}
  - name: api
    when:
      - path: {prefix: /api/}
    group_by: [ip]
    policy: {algorithm: gcra, limit: 3, period: 1m}
    status: 503
`

// TestRulesFileOnMembers: a rules file loaded with httpadapter.LoadRules
// runs unchanged on members' Limiters: its rules are shared once the
// members have synced, and with the owner gone they fall back to the
// member's share instead of failing the request.
func TestRulesFileOnMembers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	require.NoError(t, os.WriteFile(path, []byte(rulesFile), 0o600))
	rules, err := httpadapter.LoadRules(path)
	require.NoError(t, err)
	d := newDetached(t, 2, newFakeClock())
	var handlers []http.Handler
	for _, m := range d.members {
		m.SetLive(2)
		mw, err := httpadapter.New(m.Limiter, httpadapter.Config{Rules: rules, SecretKey: []byte("0123456789abcdef")})
		require.NoError(t, err)
		handlers = append(handlers, mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	}
	serve := func(i int, method, path string) int {
		w := httptest.NewRecorder()
		handlers[i].ServeHTTP(w, httptest.NewRequest(method, path, nil))
		return w.Code
	}
	assert.Equal(t, http.StatusOK, serve(0, http.MethodPost, "/login"))
	assert.Equal(t, http.StatusOK, serve(1, http.MethodPost, "/login"))
	d.syncAll()
	d.syncAll()
	assert.Equal(t, http.StatusOK, serve(0, http.MethodGet, "/login"), "not the rule's method")
	assert.Equal(t, http.StatusTooManyRequests, serve(0, http.MethodPost, "/login"), "member 0 learned member 1's hit")
	assert.Equal(t, http.StatusTooManyRequests, serve(1, http.MethodPost, "/login"))

	var codes []int
	for i := range 4 {
		codes = append(codes, serve(i%2, http.MethodGet, "/api/items"))
		d.syncAll()
		d.syncAll()
	}
	assert.Equal(t, []int{200, 200, 200, 503}, codes, "the GCRA rule is shared across members")

	d.down.Store(true)
	d.syncAll()
	assert.Equal(t, http.StatusServiceUnavailable, serve(0, http.MethodGet, "/api/other"), "the owner is gone: the limit holds, from member 0's copy")
	assert.Equal(t, http.StatusTooManyRequests, serve(1, http.MethodPost, "/login"))
}
