package httpadapter_test

import (
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
)

// TestPolicyWindowOfLongestPeriods: the RateLimit-Policy window is the
// period in whole seconds rounded up, and saturates rather than wrapping
// to a negative number for periods near the largest duration.
func TestPolicyWindowOfLongestPeriods(t *testing.T) {
	tests := []struct {
		period time.Duration
		want   string
	}{
		{time.Minute, `"r";q=1;w=60`},
		{time.Minute + time.Millisecond, `"r";q=1;w=61`},
		{math.MaxInt64 / time.Millisecond * time.Millisecond, `"r";q=1;w=9223372037`}, // the longest fixed window
		{math.MaxInt64/time.Millisecond*time.Millisecond - time.Second, `"r";q=1;w=9223372036`},
	}
	for _, tt := range tests {
		m, err := httpadapter.New(newFake(), httpadapter.Config{Rules: []httpadapter.Rule{{
			Name: "r", Policy: actorlimit.Policy{Limit: 1, Period: tt.period}}}})
		require.NoError(t, err, "period %d", tt.period)
		w := httptest.NewRecorder()
		m.Handler(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		assert.Equal(t, tt.want, w.Header().Get("RateLimit-Policy"), "period %d", tt.period)
	}
}
