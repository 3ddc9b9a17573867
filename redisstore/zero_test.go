package redisstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/redisstore"
)

// TestZeroStore: a Store not made by New refuses to decide with an error
// wrapping ErrUnavailable; its other methods answer; nothing panics.
func TestZeroStore(t *testing.T) {
	var s redisstore.Store
	checks := []algo.Check{{Op: algo.OpHit, Algorithm: algo.FixedWindow, ID: "a", Period: 1e9, Limit: 1, Burst: 1, N: 1}}
	err := s.Decide(context.Background(), 0, checks, make([]algo.Decision, 1))
	require.ErrorIs(t, err, redisstore.ErrUnavailable)
	assert.Contains(t, err.Error(), "not made by redisstore.New")
	assert.Equal(t, redisstore.Stats{}, s.Stats())
	assert.Equal(t, -1, s.Len())
}
