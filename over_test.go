package actorlimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
)

// Over: the public API on a backend of the caller's, validated at the edge,
// with Close reaching the backend.
func TestOver(t *testing.T) {
	_, err := actorlimit.Over(nil)
	require.ErrorIs(t, err, actorlimit.ErrInvalidArgument)

	f := &fakeBackend{}
	lim, err := actorlimit.Over(f)
	require.NoError(t, err)
	require.True(t, lim.Started())
	_, err = lim.Hit(context.Background(), "", actorlimit.Policy{Limit: 1, Period: time.Second})
	require.ErrorIs(t, err, actorlimit.ErrInvalidArgument)
	assert.Empty(t, f.seen(), "bad input reached the backend")
	res, err := lim.HitN(context.Background(), "x", actorlimit.Policy{Limit: 5, Period: time.Second}, 2)
	require.NoError(t, err)
	assert.True(t, res.Allowed)
	assert.EqualValues(t, 2, res.Count)
	require.Len(t, f.seen(), 1)
	assert.Equal(t, "x", f.seen()[0].ID)
	assert.Nil(t, lim.PID())
	require.NoError(t, lim.Close())
	assert.True(t, f.closed)
}
