package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
	"github.com/actorlimit/actorlimit/metrics"
)

// TestZeroCollector: a Collector not made by New counts nothing, passes
// the calls of its wrapped limiters through untimed, and registering it
// fails with ErrNotMade; nothing panics. The zero Config works.
func TestZeroCollector(t *testing.T) {
	var c metrics.Collector
	c.Observe(httpadapter.Observation{Rule: "r", Outcome: httpadapter.Within})
	c.SetLimiter(&fakeStats{})
	c.SetStore(metrics.StoreStatsFunc(func() metrics.StoreStats { return metrics.StoreStats{} }))
	c.SetCluster(metrics.ClusterStatsFunc(func() metrics.ClusterStats { return metrics.ClusterStats{} }))
	lim := &fakeLimiter{counts: map[string]int64{}}
	res := make([]actorlimit.Result, 1)
	require.NoError(t, c.Wrap(lim).HitMany(t.Context(), []actorlimit.HitRequest{{ID: "a", Policy: perHour(1)}}, res))
	assert.True(t, res[0].Allowed, "the call went through")

	started, err := actorlimit.Start()
	require.NoError(t, err)
	defer started.Close()
	r, err := c.WrapLimiter(started).CheckRate("a", 1000, 1)
	require.NoError(t, err)
	assert.True(t, r.Allowed)

	err = prometheus.NewRegistry().Register(&c)
	require.ErrorIs(t, err, metrics.ErrNotMade)
	// Gathered all the same (through a registration that skips Describe's
	// check), the zero Collector gives no metric, only ErrNotMade.
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(unchecked{&c}))
	mfs, err := reg.Gather()
	require.ErrorIs(t, err, metrics.ErrNotMade)
	assert.Empty(t, mfs, "the zero Collector counted nothing")
	descs := make(chan *prometheus.Desc, 64)
	c.Describe(descs)
	close(descs)
	assert.Len(t, descs, 1, "Describe gives one Desc, the one that fails registration")

	_, err = metrics.New(metrics.Config{})
	assert.NoError(t, err, "the zero Config is valid")
}

// unchecked registers a collector without its Descs, so that a registry
// gathers what it collects without checking it first.
type unchecked struct{ c prometheus.Collector }

func (unchecked) Describe(chan<- *prometheus.Desc)      {}
func (u unchecked) Collect(ch chan<- prometheus.Metric) { u.c.Collect(ch) }
