package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster"
)

// TestZeroMember: a Member not made by Start answers every call with an
// error wrapping actorlimit.ErrClosed, or a zero answer; nothing panics,
// and neither does a Limiter over it.
func TestZeroMember(t *testing.T) {
	var m cluster.Member
	ctx := context.Background()
	chk := algo.Check{Op: algo.OpHit, Algorithm: algo.FixedWindow, ID: "a", Period: time.Second, Limit: 1, Burst: 1, N: 1}
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"Do", func() error { _, err := m.Do(ctx, chk); return err }},
		{"DoMany", func() error { return m.DoMany(ctx, []algo.Check{chk}, make([]algo.Decision, 1)) }},
		{"Sweep", func() error { _, err := m.Sweep(ctx); return err }},
		{"Stats", func() error { _, err := m.Stats(ctx); return err }},
	} {
		err := tc.do()
		require.ErrorIs(t, err, actorlimit.ErrClosed, tc.name)
		assert.Contains(t, err.Error(), "not made by cluster.Start", tc.name)
	}
	m.SyncNow()
	assert.Nil(t, m.Members())
	assert.Equal(t, cluster.SyncStats{}, m.SyncStats())
	assert.Nil(t, m.PID())
	assert.NoError(t, m.Close())
	m.Kill()

	l, err := actorlimit.Over(&cluster.Member{})
	require.NoError(t, err)
	_, err = l.Hit(ctx, "a", actorlimit.Policy{Limit: 1, Period: time.Second})
	assert.ErrorIs(t, err, actorlimit.ErrClosed)
}
