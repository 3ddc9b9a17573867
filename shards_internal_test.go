package actorlimit

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShardIndexIsStable pins the hash of ids onto shards: a persisted
// limiter finds each id's state on the shard the index chose when it was
// written, by another process, maybe on another platform. A change of the
// hash must fail here, not lose users' counts.
func TestShardIndexIsStable(t *testing.T) {
	for _, tc := range []struct {
		id      string
		seed    shardSeed
		n, want int
	}{
		{"a", 0, 1024, 928},
		{"10.0.0.1", 0, 1024, 788},
		{"user:12345678", 0, 1024, 312},
		{"0123456789abcdef0123", 0, 1024, 918},
		{"a", 0x5eed, 7, 3},
		{"10.0.0.1", 0x5eed, 7, 1},
		{"user:12345678", 0x5eed, 7, 4},
		{"0123456789abcdef0123", 0x5eed, 7, 6},
	} {
		assert.Equal(t, tc.want, tc.seed.index(tc.id, tc.n), "%q, seed %#x, %d shards", tc.id, tc.seed, tc.n)
	}
}

// TestShardIndexSpreadsIDs: ids alike but for a digit or two (addresses,
// user numbers) spread evenly over the shards, whatever the seed, and
// every index is in range.
func TestShardIndexSpreadsIDs(t *testing.T) {
	const ids = 40_000
	for _, n := range []int{2, 3, 8, 64} {
		for _, seed := range []shardSeed{0, 1, randomSeed()} {
			counts := make([]int, n)
			for i := range ids {
				id := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
				if i%2 == 1 {
					id = fmt.Sprint("user:", i)
				}
				s := seed.index(id, n)
				require.True(t, s >= 0 && s < n, "index %d of %d", s, n)
				counts[s]++
			}
			for s, c := range counts {
				// 40 000/64 = 625 a shard: 5 standard deviations is 125.
				assert.InDelta(t, ids/n, c, float64(ids/n)/5, "shard %d of %d, seed %#x", s, n, seed)
			}
		}
	}
}

// TestShardIndexAllocatesNothing: the index is on every check's path.
func TestShardIndexAllocatesNothing(t *testing.T) {
	seed := randomSeed()
	id := "user:1234567890"
	allocs := testing.AllocsPerRun(100, func() { _ = seed.index(id, 8) })
	assert.Zero(t, allocs)
}
