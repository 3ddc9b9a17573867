package httpadapter_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/httpadapter"
)

func TestDelay(t *testing.T) {
	block := httpadapter.Rule{Name: "b", Policy: perMinute(10)}
	monitor := httpadapter.Rule{Name: "m", Policy: perMinute(10), Action: httpadapter.Action{Kind: httpadapter.Monitor}}
	tests := []struct {
		name      string
		rules     []httpadapter.Rule
		noDelay   bool
		sleepErr  error
		wantSleep []time.Duration
		wantNext  int
	}{
		{"block rule waits", []httpadapter.Rule{block}, false, nil, []time.Duration{1500 * time.Millisecond}, 1},
		{"monitor rule never waits", []httpadapter.Rule{monitor}, false, nil, nil, 1},
		{"NoDelay", []httpadapter.Rule{block}, true, nil, nil, 1},
		{"client gone while waiting", []httpadapter.Rule{block}, false, context.Canceled, []time.Duration{1500 * time.Millisecond}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := newFake()
			lim.Delay = 1500 * time.Millisecond
			m := newMW(t, lim, httpadapter.Config{Rules: tt.rules, NoDelay: tt.noDelay})
			var slept []time.Duration
			httpadapter.SetSleep(m, func(_ context.Context, d time.Duration) error {
				slept = append(slept, d)
				return tt.sleepErr
			})
			next := &okHandler{}
			serve(m.Handler(next), req("/"))
			assert.Equal(t, tt.wantSleep, slept)
			assert.Equal(t, tt.wantNext, next.calls)
		})
	}
}

// TestAlgorithms runs every algorithm a rules file can name against the
// real limiter: limit 1 per minute, burst 1.
func TestAlgorithms(t *testing.T) {
	for _, alg := range []string{"fixed_window", "sliding_window", "gcra", "token_bucket", "leaky_bucket", "sliding_log"} {
		t.Run(alg, func(t *testing.T) {
			rules, err := httpadapter.ParseRules(fmt.Appendf(nil,
				"rules:\n  - name: r\n    group_by: [ip]\n    policy: {algorithm: %s, limit: 1, period: 1m, burst: 1}\n", alg))
			require.NoError(t, err)
			m := newMW(t, startLimiter(t), httpadapter.Config{Rules: rules})
			var slept []time.Duration
			httpadapter.SetSleep(m, func(_ context.Context, d time.Duration) error {
				slept = append(slept, d)
				return nil
			})
			h := m.Handler(&okHandler{})
			codes := map[int]int{}
			for range 5 {
				codes[serve(h, req("/")).Code]++
			}
			assert.Positive(t, codes[http.StatusOK], "allowed")
			assert.Positive(t, codes[http.StatusTooManyRequests], "blocked")
			assert.Equal(t, 5, codes[http.StatusOK]+codes[http.StatusTooManyRequests])
			assert.Zero(t, m.Stats().Rules[0].Errors)
			if alg == "leaky_bucket" {
				assert.NotEmpty(t, slept, "a leaky bucket makes the hit behind the first wait")
			} else {
				assert.Empty(t, slept)
			}
		})
	}
}

func TestAlgorithmPolicyErrors(t *testing.T) {
	for _, tt := range []struct{ data, want string }{
		{"rules:\n  - name: r\n    policy: {algorithm: sliding_window, limit: 1, period: 1500us}\n", `line 2: rule "r": policy: period 1.5ms is not a whole number of milliseconds`},
		{"rules:\n  - name: r\n    policy: {algorithm: sliding_log, limit: 100000000, period: 1s}\n", `line 2: rule "r": policy: limit 100000000 is more than 10000, too large a log for sliding_log`},
	} {
		_, err := httpadapter.ParseRules([]byte(tt.data))
		require.Error(t, err)
		assert.True(t, errors.Is(err, httpadapter.ErrInvalidConfig))
		assert.Contains(t, err.Error(), tt.want)
	}
}
