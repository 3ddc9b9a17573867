package httpadapter_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
)

// limiterFunc is a Limiter of a func type, for a nil func behind the
// interface.
type limiterFunc func(context.Context, []actorlimit.HitRequest, []actorlimit.Result) error

func (f limiterFunc) HitMany(ctx context.Context, hits []actorlimit.HitRequest, res []actorlimit.Result) error {
	return f(ctx, hits, res)
}

// TestNewRefusesUnusableLimiters checks that New refuses, with a clear
// error, a limiter that would panic on the first request.
func TestNewRefusesUnusableLimiters(t *testing.T) {
	rules := []httpadapter.Rule{{Name: "r", Policy: perMinute(1)}}
	tests := []struct {
		name string
		lim  httpadapter.Limiter
		want string
	}{
		{"nil", nil, "limiter is nil"},
		{"nil *actorlimit.Limiter", (*actorlimit.Limiter)(nil), "limiter is a nil *actorlimit.Limiter"},
		{"nil fake", (*fakeLimiter)(nil), "limiter is a nil *httpadapter_test.fakeLimiter"},
		{"nil func", limiterFunc(nil), "limiter is a nil httpadapter_test.limiterFunc"},
		{"zero *actorlimit.Limiter", &actorlimit.Limiter{}, "limiter *actorlimit.Limiter was never started"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := httpadapter.New(tt.lim, httpadapter.Config{Rules: rules})
			require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.want)
			assert.Nil(t, m)
		})
	}
	lim := startLimiter(t)
	_, err := httpadapter.New(lim, httpadapter.Config{Rules: rules})
	assert.NoError(t, err, "a started limiter")
	require.NoError(t, lim.Close())
	_, err = httpadapter.New(lim, httpadapter.Config{Rules: rules})
	assert.NoError(t, err, "a closed one is accepted: its failures are counted, as at run time")
}
