package actorlimit_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/persist"
)

// wrappedFS is the operating system's file system behind a type of the
// test's own, as a user's wrapper is.
type wrappedFS struct{ persist.FS }

// TestPersistenceUnwritable: Start refuses a directory it cannot write,
// naming the path and the cause, unless StartUnwritable, which serves and
// reports it; it creates a missing directory whatever the file system.
func TestPersistenceUnwritable(t *testing.T) {
	ctx := context.Background()
	p := actorlimit.Policy{Limit: 10, Period: time.Hour}
	base := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(base, "file"), nil, 0o600))
	under := filepath.Join(base, "file", "state")
	tmpDir := filepath.Join(base, "tmpdir")
	require.NoError(t, os.MkdirAll(filepath.Join(tmpDir, "snapshot.tmp", "x"), 0o750))

	for name, dir := range map[string]string{"under a regular file": under, "snapshot.tmp a directory": tmpDir} {
		t.Run(name, func(t *testing.T) {
			clk := newFakeClock()
			_, err := startPersisted(t, clk, dir, actorlimit.PersistConfig{})
			require.ErrorIs(t, err, actorlimit.ErrUnwritable)
			assert.ErrorContains(t, err, dir)

			lim, err := startPersisted(t, clk, dir, actorlimit.PersistConfig{StartUnwritable: true})
			require.NoError(t, err, "served anyway")
			res, err := lim.Hit(ctx, "a", p)
			require.NoError(t, err)
			assert.True(t, res.Allowed)
			st, err := lim.Stats(ctx)
			require.NoError(t, err)
			assert.ErrorIs(t, st.Loaded.Unwritable, actorlimit.ErrUnwritable)
			assert.Positive(t, st.PersistErrors, "Start's snapshot could not be written")
			assert.Error(t, lim.Close(), "nothing was kept")
		})
	}

	t.Run("missing, on another file system", func(t *testing.T) {
		clk, dir := newFakeClock(), filepath.Join(base, "a", "b")
		pc := actorlimit.PersistConfig{FS: wrappedFS{persist.OS}}
		lim, err := startPersisted(t, clk, dir, pc)
		require.NoError(t, err)
		_, err = lim.Hit(ctx, "a", p)
		require.NoError(t, err)
		require.NoError(t, lim.Close())
		lim, err = startPersisted(t, clk, dir, pc)
		require.NoError(t, err)
		res, err := lim.Peek(ctx, "a", p)
		require.NoError(t, err)
		assert.Equal(t, int64(1), res.Count, "kept in the directory Start created")
	})
}

// TestPersistenceLoadedStats: Stats reports what Start loaded: the
// records, and the bytes of a log's torn tail.
func TestPersistenceLoadedStats(t *testing.T) {
	ctx := context.Background()
	clk, dir := newFakeClock(), t.TempDir()
	lim, err := startPersisted(t, clk, dir, actorlimit.PersistConfig{})
	require.NoError(t, err)
	st, err := lim.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, actorlimit.PersistLoaded{}, st.Loaded, "an empty directory")
	for _, id := range []string{"a", "b", "c"} {
		_, err := lim.Hit(ctx, id, persistPolicies[0])
		require.NoError(t, err)
	}
	require.NoError(t, lim.Close())
	logs, err := filepath.Glob(filepath.Join(dir, "log-*"))
	require.NoError(t, err)
	require.Len(t, logs, 1)
	f, err := os.OpenFile(logs[0], os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write(make([]byte, 7)) // a write the crash left as zeros
	require.NoError(t, err)
	require.NoError(t, f.Close())

	lim, err = startPersisted(t, clk, dir, actorlimit.PersistConfig{})
	require.NoError(t, err)
	st, err = lim.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, st.Loaded.Records)
	assert.Equal(t, 7, st.Loaded.TornBytes)
	assert.Equal(t, uint64(2), st.Loaded.Generation)
}

// TestPersistenceDamagedSetAside: with StartEmptyOnCorrupt, a damaged
// snapshot and its intact log are both set aside whole, reported in Stats
// and logged; the fresh limiter writes files of its own.
func TestPersistenceDamagedSetAside(t *testing.T) {
	ctx := context.Background()
	clk, dir := newFakeClock(), t.TempDir()
	lim, err := startPersisted(t, clk, dir, actorlimit.PersistConfig{})
	require.NoError(t, err)
	_, err = lim.Hit(ctx, "a", persistPolicies[0])
	require.NoError(t, err)
	require.NoError(t, lim.Close())
	path := filepath.Join(dir, "snapshot")
	snap, err := os.ReadFile(path)
	require.NoError(t, err)
	snap[len(snap)/2] ^= 1
	require.NoError(t, os.WriteFile(path, snap, 0o600))
	logPath := filepath.Join(dir, "log-0000000000000002")
	logData, err := os.ReadFile(logPath)
	require.NoError(t, err)

	_, err = startPersisted(t, clk, dir, actorlimit.PersistConfig{})
	require.ErrorIs(t, err, actorlimit.ErrCorrupt)

	var logs bytes.Buffer
	lim, err = startPersisted(t, clk, dir, actorlimit.PersistConfig{StartEmptyOnCorrupt: true},
		actorlimit.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)
	st, err := lim.Stats(ctx)
	require.NoError(t, err)
	assert.True(t, st.Loaded.Discarded)
	assert.Equal(t, []string{"log-0000000000000002.corrupt", "snapshot.corrupt"}, st.Loaded.SetAside)
	_, err = lim.Hit(ctx, "b", persistPolicies[0])
	require.NoError(t, err)
	require.NoError(t, lim.Close()) // a snapshot and a log of its own

	for name, want := range map[string][]byte{"snapshot.corrupt": snap, "log-0000000000000002.corrupt": logData} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err, name)
		assert.Equal(t, want, got, "%s is kept whole", name)
		assert.Contains(t, logs.String(), name, "logged")
	}
}
