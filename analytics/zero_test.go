package analytics_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/analytics"
)

// TestZeroAnalytics: an Analytics not made by New records nothing and
// gives empty snapshots; nothing panics (it divided by a zero slot). The
// zero Config works.
func TestZeroAnalytics(t *testing.T) {
	var a analytics.Analytics
	a.Observe(obs("r", "g", 10, 9))
	a.SetOrder("r")
	assert.Equal(t, analytics.Snapshot{}, a.Snapshot())
	assert.Zero(t, a.MemoryPerRule())
	assert.NoError(t, a.Close())

	b, err := analytics.New(analytics.Config{})
	require.NoError(t, err, "the zero Config is valid")
	b.Observe(obs("r", "g", 10, 9))
	assert.Len(t, b.Snapshot().Rules, 1)
	require.NoError(t, b.Close())
}
