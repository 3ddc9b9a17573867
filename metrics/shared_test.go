package metrics_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
	"github.com/actorlimit/actorlimit/metrics"
)

// TestWrapKeepsSharedCounts: a wrapped limiter still says its counts are
// kept, so that httpadapter.New still wants a SecretKey.
func TestWrapKeepsSharedCounts(t *testing.T) {
	lim, err := actorlimit.Start(actorlimit.WithPersistence(t.TempDir(), actorlimit.PersistConfig{}))
	require.NoError(t, err)
	defer lim.Close()
	col, err := metrics.New(metrics.Config{})
	require.NoError(t, err)
	for _, w := range []httpadapter.Limiter{col.Wrap(lim), col.WrapLimiter(lim)} {
		_, err := httpadapter.New(w, httpadapter.Config{AllowNoRules: true})
		assert.ErrorIs(t, err, httpadapter.ErrInvalidConfig, "%T", w)
	}
}
