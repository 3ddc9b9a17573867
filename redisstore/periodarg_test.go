package redisstore

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPeriodArg: a round's boxed periods are the periods asked for, in any
// order, past the cache's size (evictions), and a period asked again is
// boxed once.
func TestPeriodArg(t *testing.T) {
	r := new(round)
	for _, tc := range []struct {
		name string
		ms   []int64
	}{
		{"one", []int64{1000, 1000}},
		{"a request's three", []int64{1000, 60_000, 3_600_000, 60_000, 1000}},
		{"more than the cache holds", []int64{1, 2, 3, 4, 5, 6, 1, 7, 2, 8, 3_600_000, 1000}},
		{"small and negative", []int64{0, 255, 256, -1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, ms := range tc.ms {
				assert.Equal(t, any(ms), r.periodArg(ms), "period %d ms", ms)
			}
		})
	}
	periods := []int64{60_000} // not a constant, which the compiler boxes statically
	again := testing.AllocsPerRun(100, func() { _ = r.periodArg(periods[0]) })
	assert.Zero(t, again, "a cached period allocates nothing")
}
