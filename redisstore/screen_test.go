package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/redisstore"
)

// TestScreenAgreesWithDecide: Screen refuses exactly what Decide refuses
// before sending anything (no Redis needed: nothing is sent).
func TestScreenAgreesWithDecide(t *testing.T) {
	s, err := redisstore.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	require.NoError(t, err)
	cases := []struct {
		name  string
		check algo.Check
		bad   bool
	}{
		{"whole ms window", hit(algo.SlidingWindow, "a", 10, 1, time.Second), false},
		{"window not whole ms", hit(algo.SlidingWindow, "a", 10, 1, 1500*time.Microsecond), true},
		{"sliding limit above 2^52", hit(algo.SlidingLog, "a", 1<<53, 1, time.Second), true},
		{"bucket limit above 2^52", hit(algo.GCRA, "a", 1<<53, 1, time.Second), true},
		{"an algorithm not in the list", hit(algo.Algorithm(len(algo.All())), "a", 10, 1, time.Second), true},
	}
	// Every algorithm of the one list has its script: one added to the list
	// and not here is refused, and fails this test, instead of going to
	// another algorithm's script.
	for _, a := range algo.All() {
		c := hit(a, "a", 10, 1, time.Second)
		c.Burst = 10
		cases = append(cases, struct {
			name  string
			check algo.Check
			bad   bool
		}{"every algorithm: " + a.String(), c, false})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Screen(&tc.check)
			if !tc.bad {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, redisstore.ErrUnsupported)
			derr := s.Decide(context.Background(), t0, []algo.Check{tc.check}, make([]algo.Decision, 1))
			assert.Equal(t, derr, err)
		})
	}
}
