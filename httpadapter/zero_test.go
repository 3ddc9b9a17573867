package httpadapter_test

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

// TestZeroValues: a zero or half-configured value of each exported type
// either works or is refused with an error wrapping ErrInvalidConfig that
// names what is missing; none panics.
func TestZeroValues(t *testing.T) {
	okRule := httpadapter.Rule{Name: "r", Policy: actorlimit.Policy{Limit: 1, Period: time.Second}}
	for _, tc := range []struct {
		name string
		err  func() error
		want string // "" when it works
	}{
		{"zero Middleware's SetRules", func() error { return new(httpadapter.Middleware).SetRules([]httpadapter.Rule{okRule}) },
			"the Middleware was not made by httpadapter.New"},
		{"zero Config", func() error { _, err := httpadapter.New(newFake(), httpadapter.Config{}); return err }, "no rules"},
		{"zero Config with AllowNoRules", func() error {
			_, err := httpadapter.New(newFake(), httpadapter.Config{AllowNoRules: true})
			return err
		}, ""},
		{"nil limiter", func() error {
			_, err := httpadapter.New(nil, httpadapter.Config{Rules: []httpadapter.Rule{okRule}})
			return err
		}, "limiter is nil"},
		{"zero actorlimit.Limiter", func() error {
			_, err := httpadapter.New(new(actorlimit.Limiter), httpadapter.Config{Rules: []httpadapter.Rule{okRule}})
			return err
		}, "was never started"},
		{"zero Rule", func() error {
			_, err := httpadapter.New(newFake(), httpadapter.Config{Rules: []httpadapter.Rule{{}}})
			return err
		}, `rule "" (rules[0]): name: "" is not 1 to 64 letters`},
		{"Rule with a zero Policy", func() error {
			_, err := httpadapter.New(newFake(), httpadapter.Config{Rules: []httpadapter.Rule{{Name: "r"}}})
			return err
		}, `rule "r" (rules[0]): policy: `},
		{"zero Condition", func() error {
			r := okRule
			r.When = []httpadapter.Condition{{}}
			_, err := httpadapter.New(newFake(), httpadapter.Config{Rules: []httpadapter.Rule{r}})
			return err
		}, "when[0].condition: a zero Condition (build one with Method"},
		{"zero Action is a 429 block", func() error {
			_, err := httpadapter.New(newFake(), httpadapter.Config{Rules: []httpadapter.Rule{okRule}})
			return err
		}, ""},
		{"ParseRules of nothing", func() error { _, err := httpadapter.ParseRules(nil); return err }, `no "rules" key`},
	} {
		err := tc.err()
		if tc.want == "" {
			assert.NoError(t, err, tc.name)
			continue
		}
		require.ErrorIs(t, err, httpadapter.ErrInvalidConfig, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
	}
}

// TestZeroMiddlewareFailsClosed: a zero Middleware's handler answers 500,
// naming the mistake, and passes nothing on; its Stats are empty.
func TestZeroMiddlewareFailsClosed(t *testing.T) {
	var m httpadapter.Middleware
	called := false
	w := httptest.NewRecorder()
	m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })).
		ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.Contains(t, w.Body.String(), "the Middleware was not made by httpadapter.New")
	assert.False(t, called)
	assert.Equal(t, httpadapter.Stats{}, m.Stats())
}
