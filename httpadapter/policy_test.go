package httpadapter_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
)

// neverDrains is the policy of issue 8: a token bucket of 50 000 refilled
// at 1 a day takes 137 years to drain, past the limiter's 100-year cap, so
// the limiter refuses every hit under it.
var neverDrains = actorlimit.Policy{Algorithm: actorlimit.TokenBucket, Limit: 1, Period: 24 * time.Hour, Burst: 50000}

const neverDrainsYAML = `rules:
  - name: per-ip
    when:
      - path: {exact: /upload}
    group_by: [ip]
    policy: {algorithm: fixed_window, limit: 2, period: 1h}
  - name: uploads
    when:
      - path: {prefix: /upload}
    policy: {algorithm: token_bucket, limit: 1, period: 24h, burst: 50000}
`

// TestPoliciesAreValidatedUpFront checks that a policy the limiter would
// refuse is refused when rules are parsed, built or swapped, with the rule
// and the field named.
func TestPoliciesAreValidatedUpFront(t *testing.T) {
	_, err := httpadapter.ParseRules([]byte(neverDrainsYAML))
	require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
	assert.Contains(t, err.Error(), `line 7: rule "uploads": policy: `)
	assert.Contains(t, err.Error(), "(burst)")

	bad := httpadapter.Rule{Name: "uploads", Policy: neverDrains}
	_, err = httpadapter.New(newFake(), httpadapter.Config{Rules: []httpadapter.Rule{bad}})
	require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
	assert.Contains(t, err.Error(), `rule "uploads" (rules[0]): policy: `)
	assert.Contains(t, err.Error(), "(burst)")

	good := httpadapter.Rule{Name: "per-ip", Policy: perMinute(2)}
	m := newMW(t, newFake(), httpadapter.Config{Rules: []httpadapter.Rule{good}})
	err = m.SetRules([]httpadapter.Rule{good, bad})
	require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
	assert.Contains(t, err.Error(), `rule "uploads" (rules[1]): policy: `)
	assert.Len(t, m.Stats().Rules, 1, "a refused set changes nothing")
}

// TestPolicyErrorsMatchTheLimiter checks that a rule's policy is accepted
// exactly when actorlimit.Policy.Validate accepts it.
func TestPolicyErrorsMatchTheLimiter(t *testing.T) {
	policies := []actorlimit.Policy{
		perMinute(1),
		{Limit: -1, Period: time.Second},
		{Limit: 1},
		{Limit: 1, Period: 1500 * time.Microsecond},
		{Algorithm: actorlimit.GCRA, Limit: 1, Period: 1500 * time.Microsecond},
		{Limit: 1, Period: time.Second, Burst: -1},
		{Algorithm: actorlimit.SlidingLog, Limit: actorlimit.MaxSlidingLogLimit + 1, Period: time.Second},
		{Algorithm: actorlimit.GCRA, Limit: 1, Period: actorlimit.MaxSpan + 1},
		{Algorithm: actorlimit.FixedWindow, Limit: 1, Period: actorlimit.MaxSpan + time.Millisecond},
		{Algorithm: actorlimit.LeakyBucket, Limit: 1, Period: 24 * time.Hour, Burst: 36500 * 100},
		neverDrains,
		{Algorithm: 99, Limit: 1, Period: time.Second},
	}
	for _, p := range policies {
		_, err := httpadapter.New(newFake(), httpadapter.Config{Rules: []httpadapter.Rule{{Name: "r", Policy: p}}})
		if want := p.Validate(); want != nil {
			require.ErrorIs(t, err, httpadapter.ErrInvalidConfig, "%+v", p)
			assert.Contains(t, err.Error(), `rule "r" (rules[0]): policy`, "%+v", p)
			assert.NotContains(t, err.Error(), "Policy.", "%+v: the field is named as rules files name it", p)
		} else {
			assert.NoError(t, err, "%+v", p)
		}
	}
}
