package actorlimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
)

// TestFloodCannotResetActiveLimit is the report of issue 8: with
// WithMaxEntries(100000), an id limited to 100 per hour is hit 50 000 times,
// three fresh ids of a flood between two of its hits, so that the flood
// fills the table and keeps evicting. Eviction used to take the earliest
// window and, within it, the smallest id: an id sorted before the flood's
// was evicted over and over, its count starting again each time, and
// allowed 44 620 hits. Now it is allowed its 100, wherever it sorts.
func TestFloodCannotResetActiveLimit(t *testing.T) {
	const (
		maxEntries = 100_000
		hits       = 50_000
		flood      = 3    // fresh ids between two hits of the active id
		batch      = 1000 // requests per HitMany round trip
	)
	tests := []struct {
		name, id string
	}{
		{"sorted before the flood", "a-active-client"},
		{"sorted among the flood", "k0020000-active"},
		{"sorted after the flood", "z-active-client"},
	}
	hour := actorlimit.Policy{Limit: 100, Period: time.Hour}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := start(t, newFakeClock(), actorlimit.WithMaxEntries(maxEntries))
			ctx := context.Background()
			reqs := make([]actorlimit.HitRequest, 0, batch)
			res := make([]actorlimit.Result, batch)
			allowed, fresh := 0, 0
			send := func() {
				require.NoError(t, lim.HitMany(ctx, reqs, res[:len(reqs)]))
				for i, r := range reqs {
					if r.ID == tt.id && res[i].Allowed {
						allowed++
					}
				}
				reqs = reqs[:0]
			}
			for range hits {
				for range flood {
					reqs = append(reqs, actorlimit.HitRequest{ID: fmt.Sprintf("k%07d", fresh), Policy: hour})
					fresh++
				}
				reqs = append(reqs, actorlimit.HitRequest{ID: tt.id, Policy: hour})
				if len(reqs) > batch-flood-1 {
					send()
				}
			}
			send()
			assert.Equal(t, 100, allowed, "hits of %q allowed", tt.id)

			st, err := lim.Stats(ctx)
			require.NoError(t, err)
			assert.Equal(t, maxEntries, st.Entries)
			assert.Equal(t, uint64(fresh+1-maxEntries), st.Evictions, "evictions: every fresh id past the bound, never the active one")
			res1, err := lim.Peek(ctx, tt.id, hour)
			require.NoError(t, err)
			assert.Equal(t, int64(hits), res1.Count, "the active id's count, never reset")
		})
	}
}
