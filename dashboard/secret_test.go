package dashboard_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/analytics"
	"github.com/actorlimit/actorlimit/dashboard"
	"github.com/actorlimit/actorlimit/httpadapter"
)

type allowAll struct{}

func (allowAll) HitMany(_ context.Context, hits []actorlimit.HitRequest, res []actorlimit.Result) error {
	for i, h := range hits {
		res[i] = actorlimit.Result{Allowed: true, Limit: h.Policy.Limit, Remaining: h.Policy.Limit - 1}
	}
	return nil
}

type nowClock struct{ t time.Time }

func (c nowClock) Now() time.Time { return c.t }

// TestPageShowsSecretsHashed: a rule grouped by Authorization shows, on
// the page and in its JSON, the 32 hex digits of the token's HMAC under the
// middleware's key (what docs/security.md's command prints), never the
// token.
func TestPageShowsSecretsHashed(t *testing.T) {
	const token, key = "Bearer s3cr3t-token-of-a-client", "0123456789abcdef-page-key"
	an, err := analytics.New(analytics.Config{Clock: nowClock{time.Unix(1e9, 0)}})
	require.NoError(t, err)
	m, err := httpadapter.New(allowAll{}, httpadapter.Config{SecretKey: []byte(key), Observers: []httpadapter.Observer{an},
		Rules: []httpadapter.Rule{{Name: "per-token", GroupBy: []string{"ip", "header:Authorization"},
			Policy: actorlimit.Policy{Limit: 10, Period: time.Minute}}}})
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", token)
	m.Handler(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), r)

	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(token))
	short := hex.EncodeToString(mac.Sum(nil))[:32]
	h, err := dashboard.New(an, dashboard.Config{})
	require.NoError(t, err)
	for _, target := range []string{"/limits", "/limits?format=json"} {
		w := get(t, h, target)
		require.Equal(t, http.StatusOK, w.Code)
		assert.Contains(t, w.Body.String(), short, target)
		assert.NotContains(t, w.Body.String(), "s3cr3t", target)
	}
	assert.Contains(t, get(t, h, "/limits").Body.String(), "192.0.2.1 · "+short, "the page shows the group's values")
}
