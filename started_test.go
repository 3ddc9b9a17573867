package actorlimit_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
)

func TestStarted(t *testing.T) {
	var nilLimiter *actorlimit.Limiter
	assert.False(t, nilLimiter.Started(), "nil")
	assert.False(t, new(actorlimit.Limiter).Started(), "zero")

	lim, err := actorlimit.Start(actorlimit.WithClock(newFakeClock()), actorlimit.WithShards(2))
	require.NoError(t, err)
	assert.True(t, lim.Started(), "running")
	require.NoError(t, lim.Close())
	assert.True(t, lim.Started(), "closed: started, and answers ErrClosed")

	over, err := actorlimit.Over(&fakeBackend{})
	require.NoError(t, err)
	assert.True(t, over.Started(), "made by Over")
}
