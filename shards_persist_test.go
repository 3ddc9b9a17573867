package actorlimit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
)

// hitShardedIDs hits ids "id0".."id<n-1>" under every persisted policy,
// each a number of times of its own, and returns what Peek tells of each.
func hitShardedIDs(t *testing.T, lim *actorlimit.Limiter, n int) map[string]actorlimit.Result {
	t.Helper()
	ctx := context.Background()
	want := map[string]actorlimit.Result{}
	for i := range n {
		id := fmt.Sprint("id", i)
		for j, p := range persistPolicies {
			_, err := lim.HitN(ctx, id, p, int64(1+(i+j)%3))
			require.NoError(t, err)
			want[fmt.Sprint(id, "/", j)], err = lim.Peek(ctx, id, p)
			require.NoError(t, err)
		}
	}
	return want
}

// assertShardedIDs checks that lim tells what want holds of every id.
func assertShardedIDs(t *testing.T, lim *actorlimit.Limiter, n int, want map[string]actorlimit.Result, when string) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprint("id", i)
		for j, p := range persistPolicies {
			got, err := lim.Peek(ctx, id, p)
			require.NoError(t, err)
			assert.Equal(t, want[fmt.Sprint(id, "/", j)], got, "%s %s under %v", when, id, p.Algorithm)
		}
	}
}

// TestShardedPersistenceSurvivesRestart: a limiter of three shards keeps
// its state in a directory each, and one started on the same directory
// with three shards finds every id's state, under every algorithm, on the
// shard that serves the id.
func TestShardedPersistenceSurvivesRestart(t *testing.T) {
	const ids, shards = 60, 3
	clk, dir := newFakeClock(), t.TempDir()
	lim, err := startPersisted(t, clk, dir, actorlimit.PersistConfig{}, actorlimit.WithShards(shards))
	require.NoError(t, err)
	want := hitShardedIDs(t, lim, ids)
	used := map[string]bool{}
	for i := range ids {
		used[lim.PIDFor(fmt.Sprint("id", i)).Id] = true
	}
	require.Len(t, used, shards, "the ids are not spread over the shards")
	require.NoError(t, lim.Close())
	for i := range shards {
		_, err := os.Stat(filepath.Join(dir, fmt.Sprint("shard-", i), "snapshot"))
		assert.NoError(t, err, "shard %d has no snapshot of its own", i)
	}

	lim, err = startPersisted(t, clk, dir, actorlimit.PersistConfig{}, actorlimit.WithShards(shards))
	require.NoError(t, err)
	assertShardedIDs(t, lim, ids, want, "after a restart")
	st, err := lim.Stats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, ids*len(persistPolicies), st.Entries, "the shards' entries, summed")
}

// TestShardedPersistenceRefusesAnotherCount: a directory written with one
// number of shards cannot be started with another (ids would hash onto
// shards whose files do not hold their state). Start fails with an error
// that names both counts, and the directory is left as it was: started
// again with its own count, the limiter finds every id.
func TestShardedPersistenceRefusesAnotherCount(t *testing.T) {
	const ids = 20
	clk := newFakeClock()
	three, one := t.TempDir(), t.TempDir()
	lim, err := startPersisted(t, clk, three, actorlimit.PersistConfig{}, actorlimit.WithShards(3))
	require.NoError(t, err)
	wantThree := hitShardedIDs(t, lim, ids)
	require.NoError(t, lim.Close())
	lim, err = startPersisted(t, clk, one, actorlimit.PersistConfig{})
	require.NoError(t, err)
	wantOne := hitShardedIDs(t, lim, ids)
	require.NoError(t, lim.Close())

	for _, tc := range []struct {
		name   string
		dir    string
		shards int
		says   string
	}{
		{"3 started with 2", three, 2, "holds the state of 3 shards, not 2"},
		{"3 started with 1", three, 1, "holds the state of 3 shards, not 1"},
		{"1 started with 2", one, 2, "holds the state of one shard, not 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := startPersisted(t, clk, tc.dir, actorlimit.PersistConfig{}, actorlimit.WithShards(tc.shards))
			require.ErrorIs(t, err, actorlimit.ErrInvalidArgument)
			assert.Contains(t, err.Error(), tc.says)
		})
	}

	lim, err = startPersisted(t, clk, three, actorlimit.PersistConfig{}, actorlimit.WithShards(3))
	require.NoError(t, err)
	assertShardedIDs(t, lim, ids, wantThree, "3 shards after the refusals")
	lim, err = startPersisted(t, clk, one, actorlimit.PersistConfig{})
	require.NoError(t, err)
	assertShardedIDs(t, lim, ids, wantOne, "1 shard after the refusals")
}

// TestShardedPersistenceDamagedShardsFile: a shards file that is not one
// makes Start fail with an error wrapping ErrCorrupt that names it.
func TestShardedPersistenceDamagedShardsFile(t *testing.T) {
	for name, text := range map[string]string{
		"foreign":       "hello\n",
		"bad count":     "actorlimit shards v1\nx 00000000000000ff\n",
		"count of one":  "actorlimit shards v1\n1 00000000000000ff\n",
		"bad seed":      "actorlimit shards v1\n2 zz\n",
		"missing field": "actorlimit shards v1\n2\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "shards"), []byte(text), 0o600))
			for _, shards := range []int{1, 2} {
				_, err := startPersisted(t, newFakeClock(), dir, actorlimit.PersistConfig{}, actorlimit.WithShards(shards))
				require.ErrorIs(t, err, actorlimit.ErrCorrupt, "%d shards", shards)
				assert.Contains(t, err.Error(), filepath.Join(dir, "shards"))
			}
		})
	}
}

// TestShardedPersistenceUnwritable: a directory of several shards that
// cannot be written makes Start fail with an error wrapping ErrUnwritable
// that names it, unless StartUnwritable, which serves from memory.
func TestShardedPersistenceUnwritable(t *testing.T) {
	base := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(base, "file"), nil, 0o600))
	dir := filepath.Join(base, "file", "state")
	_, err := startPersisted(t, newFakeClock(), dir, actorlimit.PersistConfig{}, actorlimit.WithShards(2))
	require.ErrorIs(t, err, actorlimit.ErrUnwritable)
	assert.ErrorContains(t, err, dir)

	lim, err := startPersisted(t, newFakeClock(), dir, actorlimit.PersistConfig{StartUnwritable: true}, actorlimit.WithShards(2))
	require.NoError(t, err, "served anyway")
	want := hitShardedIDs(t, lim, 10)
	assertShardedIDs(t, lim, 10, want, "in memory")
}

// TestShardedPersistenceOwnerOnly: a sharded limiter creates its state's
// directory, and each shard's, open to their owner only (0700), and writes
// every file 0600: the state holds the limiter's ids.
func TestShardedPersistenceOwnerOnly(t *testing.T) {
	clk, dir := newFakeClock(), filepath.Join(t.TempDir(), "state")
	lim, err := startPersisted(t, clk, dir, actorlimit.PersistConfig{}, actorlimit.WithShards(2))
	require.NoError(t, err)
	hitShardedIDs(t, lim, 10)
	require.NoError(t, lim.Close())
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		assert.Equal(t, want, fi.Mode().Perm(), path)
		return nil
	}))
}
