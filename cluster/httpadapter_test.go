package cluster_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
)

// TestMiddlewareOnMembers: the HTTP middleware runs unchanged on members'
// Limiters; two members share one limit once they have synced (a member
// admits against its own copy until then).
func TestMiddlewareOnMembers(t *testing.T) {
	d := newDetached(t, 2, newFakeClock())
	rules := httpadapter.Config{Rules: []httpadapter.Rule{{
		Name:    "login",
		When:    []httpadapter.Condition{httpadapter.PathExact("/login")},
		GroupBy: []string{"ip"},
		Policy:  actorlimit.Policy{Limit: 2, Period: time.Minute},
	}}, SecretKey: []byte("0123456789abcdef")}
	var handlers []http.Handler
	for _, m := range d.members {
		mw, err := httpadapter.New(m.Limiter, rules)
		require.NoError(t, err)
		handlers = append(handlers, mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	}
	serve := func(i int) int {
		w := httptest.NewRecorder()
		handlers[i].ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/login", nil))
		return w.Code
	}
	assert.Equal(t, http.StatusOK, serve(0))
	assert.Equal(t, http.StatusOK, serve(0))
	assert.Equal(t, http.StatusOK, serve(1), "member 1 knows nothing yet: the inertia")
	d.syncAll()
	d.syncAll()
	assert.Equal(t, http.StatusTooManyRequests, serve(0), "member 0 learned member 1's hit")
	assert.Equal(t, http.StatusTooManyRequests, serve(1), "member 1 learned member 0's two")
}
