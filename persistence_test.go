package actorlimit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/actor"
	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/internal/testkit"
	"github.com/actorlimit/actorlimit/persist"
	"github.com/actorlimit/actorlimit/table"
)

// persistPolicies is one policy per algorithm.
var persistPolicies = []actorlimit.Policy{
	{Algorithm: actorlimit.FixedWindow, Limit: 5, Period: time.Minute},
	{Algorithm: actorlimit.SlidingWindow, Limit: 5, Period: time.Minute},
	{Algorithm: actorlimit.GCRA, Limit: 5, Period: time.Minute, Burst: 3},
	{Algorithm: actorlimit.TokenBucket, Limit: 5, Period: time.Minute, Burst: 4},
	{Algorithm: actorlimit.LeakyBucket, Limit: 5, Period: time.Minute, Burst: 2},
	{Algorithm: actorlimit.SlidingLog, Limit: 5, Period: time.Minute},
}

// startPersisted starts a limiter on clk that keeps its state in dir.
func startPersisted(t *testing.T, clk *fakeClock, dir string, pc actorlimit.PersistConfig, opts ...actorlimit.Option) (*actorlimit.Limiter, error) {
	t.Helper()
	opts = append([]actorlimit.Option{
		actorlimit.WithClock(clk), actorlimit.WithJanitor(0, 0), actorlimit.WithPersistence(dir, pc),
	}, opts...)
	lim, err := actorlimit.Start(opts...)
	if err == nil {
		t.Cleanup(func() { _ = lim.Close() })
	}
	return lim, err
}

// TestPersistenceSurvivesRestart runs every algorithm, closes the limiter,
// starts another on the same directory and checks it answers as the first
// would have.
func TestPersistenceSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	for _, p := range persistPolicies {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			clk, dir := newFakeClock(), t.TempDir()
			lim, err := startPersisted(t, clk, dir, actorlimit.PersistConfig{})
			require.NoError(t, err)
			for i := range 4 {
				clk.Set(epoch.Add(time.Duration(i) * 700 * ms))
				_, err := lim.Hit(ctx, "a", p)
				require.NoError(t, err)
			}
			_, err = lim.HitN(ctx, "b", p, 2)
			require.NoError(t, err)
			before := map[string]actorlimit.Result{}
			for _, id := range []string{"a", "b", "c"} {
				before[id], err = lim.Peek(ctx, id, p)
				require.NoError(t, err)
			}
			require.NoError(t, lim.Close())

			lim, err = startPersisted(t, clk, dir, actorlimit.PersistConfig{})
			require.NoError(t, err)
			for id, want := range before {
				got, err := lim.Peek(ctx, id, p)
				require.NoError(t, err)
				assert.Equal(t, want, got, "%s after a restart", id)
			}
			st, err := lim.Stats(ctx)
			require.NoError(t, err)
			assert.Equal(t, 2, st.Entries)
		})
	}
}

// TestPersistenceSkipsEnded checks that state whose window ended while the
// process was down is not loaded.
func TestPersistenceSkipsEnded(t *testing.T) {
	ctx := context.Background()
	clk, dir := newFakeClock(), t.TempDir()
	lim, err := startPersisted(t, clk, dir, actorlimit.PersistConfig{})
	require.NoError(t, err)
	for _, p := range persistPolicies {
		_, err := lim.Hit(ctx, "a", p)
		require.NoError(t, err)
	}
	require.NoError(t, lim.Close())
	clk.Advance(2 * time.Minute)
	lim, err = startPersisted(t, clk, dir, actorlimit.PersistConfig{})
	require.NoError(t, err)
	st, err := lim.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, st.Entries)
}

// TestPersistenceDamagedSnapshot checks that Start fails on a damaged file
// by default, and starts empty with the file set aside by option.
func TestPersistenceDamagedSnapshot(t *testing.T) {
	ctx := context.Background()
	clk, dir := newFakeClock(), t.TempDir()
	lim, err := startPersisted(t, clk, dir, actorlimit.PersistConfig{})
	require.NoError(t, err)
	_, err = lim.Hit(ctx, "a", persistPolicies[0])
	require.NoError(t, err)
	require.NoError(t, lim.Close())
	path := filepath.Join(dir, "snapshot")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[len(b)/2] ^= 1
	require.NoError(t, os.WriteFile(path, b, 0o600))

	_, err = startPersisted(t, clk, dir, actorlimit.PersistConfig{})
	require.ErrorIs(t, err, persist.ErrCorrupt)

	var logs bytes.Buffer
	lim, err = startPersisted(t, clk, dir, actorlimit.PersistConfig{StartEmptyOnCorrupt: true},
		actorlimit.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)
	st, err := lim.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, st.Entries)
	assert.Contains(t, logs.String(), "damaged state set aside")
	_, err = os.Stat(path + ".corrupt")
	assert.NoError(t, err)
}

func TestPersistenceBadOptions(t *testing.T) {
	dir := t.TempDir()
	for name, opts := range map[string][]actorlimit.Option{
		"empty dir":      {actorlimit.WithPersistence("", actorlimit.PersistConfig{})},
		"negative flush": {actorlimit.WithPersistence(dir, actorlimit.PersistConfig{FlushEvery: -1})},
		"store":          {actorlimit.WithPersistence(dir, actorlimit.PersistConfig{}), actorlimit.WithStore(notSnapshotter{table.New(0)})},
	} {
		_, err := actorlimit.Start(opts...)
		assert.ErrorIs(t, err, actorlimit.ErrInvalidArgument, name)
	}
}

// notSnapshotter is a store whose state cannot be saved: only the Store
// methods of the table it wraps are promoted.
type notSnapshotter struct{ actorlimit.Store }

// failingFS is the operating system's file system, whose writes fail while
// fail is set.
type failingFS struct {
	fail atomic.Bool
}

var errInjected = errors.New("injected: no space left on device")

func (f *failingFS) ReadFile(name string) ([]byte, error) { return persist.OS.ReadFile(name) }
func (f *failingFS) Remove(name string) error             { return persist.OS.Remove(name) }
func (f *failingFS) SyncDir(dir string) error             { return persist.OS.SyncDir(dir) }
func (f *failingFS) MkdirAll(dir string) error            { return persist.OS.MkdirAll(dir) }

func (f *failingFS) ReadDirNames(dir string) ([]string, error) { return persist.OS.ReadDirNames(dir) }

func (f *failingFS) Create(name string) (persist.File, error) {
	if f.fail.Load() {
		return nil, errInjected
	}
	file, err := persist.OS.Create(name)
	if err != nil {
		return nil, err
	}
	return &failingFile{File: file, fs: f}, nil
}

func (f *failingFS) Rename(oldName, newName string) error {
	if f.fail.Load() {
		return errInjected
	}
	return persist.OS.Rename(oldName, newName)
}

type failingFile struct {
	persist.File
	fs *failingFS
}

// Write writes half of p and fails, as a full disk may.
func (f *failingFile) Write(p []byte) (int, error) {
	if f.fs.fail.Load() {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, errInjected
	}
	return f.File.Write(p)
}

// TestPersistenceFailingDisk makes every write fail for a while: the
// limiter keeps serving, the failures are counted and logged, and once the
// disk works again a snapshot writes the whole state, so a restart finds
// every count.
func TestPersistenceFailingDisk(t *testing.T) {
	ctx := context.Background()
	clk, dir, fsys := newFakeClock(), t.TempDir(), &failingFS{}
	var logs testkit.Buffer
	pc := actorlimit.PersistConfig{FS: fsys}
	lim, err := startPersisted(t, clk, dir, pc, actorlimit.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)
	p := actorlimit.Policy{Limit: 1000, Period: time.Hour}

	fsys.fail.Store(true)
	for range 50 {
		res, err := lim.Hit(ctx, "a", p)
		require.NoError(t, err, "the limiter keeps serving")
		require.True(t, res.Allowed)
	}
	require.Eventually(t, func() bool {
		clk.Advance(persist.DefaultFlushEvery) // the writer flushes on the limiter's clock
		st, err := lim.Stats(ctx)
		return err == nil && st.PersistErrors > 0 && st.PersistDropped > 0
	}, 10*time.Second, time.Millisecond)
	assert.Contains(t, logs.String(), "log write failed")

	fsys.fail.Store(false)
	// the sync ticker asks for a snapshot, which covers what was dropped
	require.Eventually(t, func() bool {
		clk.Advance(persist.DefaultSyncEvery)
		b, err := os.ReadFile(filepath.Join(dir, "snapshot"))
		return err == nil && bytes.Contains(b, []byte{1, 'a'})
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, lim.Close())

	lim, err = startPersisted(t, clk, dir, actorlimit.PersistConfig{})
	require.NoError(t, err)
	res, err := lim.Peek(ctx, "a", p)
	require.NoError(t, err)
	assert.Equal(t, int64(50), res.Count)
}

// TestPersistenceSnapshotWhileHitting hits every key once while a
// snapshot of many chunks is taken, in the order the snapshot walks them
// (most hits land after their key's chunk), with flushes meanwhile; then
// it reads a copy of the directory, as a process killed then would find
// it: the new snapshot and the log after it hold every count.
func TestPersistenceSnapshotWhileHitting(t *testing.T) {
	ctx := context.Background()
	clk, dir := newFakeClock(), t.TempDir()
	lim, err := startPersisted(t, clk, dir, actorlimit.PersistConfig{})
	require.NoError(t, err)
	p := actorlimit.Policy{Limit: 1000, Period: 24 * time.Hour}
	ids := make([]string, 64*actor.SnapshotChunk)
	for i := range ids {
		ids[i] = fmt.Sprint("k", i)
	}
	slices.Sort(ids) // the order of a window's keys in the table
	want := make([]int64, len(ids))
	hit := func(i int) {
		res, err := lim.Hit(ctx, ids[i], p)
		require.NoError(t, err)
		want[i] = res.Count
	}
	for i := range ids {
		hit(i)
	}

	clk.Advance(persist.DefaultSnapshotEvery) // the writer asks for a snapshot
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range ids {
			hit(i)
		}
		close(done)
	})
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
				clk.Advance(persist.DefaultFlushEvery) // flushes while it is taken
			}
		}
	})
	wg.Wait()

	// The flushes after the last hits, and the snapshot's last chunks, go on
	// as the clock moves. The deadline is generous: the test is about what
	// the files hold, not how fast a loaded machine writes them.
	var lost atomic.Int64 // written by Eventually's goroutine
	lost.Store(int64(len(ids)))
	assert.Eventually(t, func() bool {
		clk.Advance(persist.DefaultFlushEvery)
		got, ld := loadCopy(t, dir)
		if ld.Generation < 2 {
			return false // no snapshot after Start's yet
		}
		n := 0
		for i, id := range ids {
			if got[id] != want[i] {
				n++
			}
		}
		lost.Store(int64(n))
		return n == 0
	}, 2*time.Minute, 10*time.Millisecond, "a snapshot after Start's, and every count")
	assert.Zero(t, lost.Load(), "keys, of %d, without the count the limiter told", len(ids))
}

// loadCopy copies the files of dir and loads them, as a restarted process
// would, into a fresh table; it returns every key's count.
func loadCopy(t *testing.T, dir string) (map[string]int64, persist.Loaded) {
	t.Helper()
	cp := t.TempDir()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(cp, e.Name()), b, 0o600))
	}
	j, err := persist.New(cp, persist.Config{})
	require.NoError(t, err)
	tb := table.New(0)
	now := epoch.UnixNano()
	ld, err := j.Load(now, func(r algo.Record) error { return tb.Load(now, r) })
	if err != nil {
		return nil, ld // caught between a rename and a removal: try again
	}
	counts := map[string]int64{}
	tb.Ascend(func(e table.Entry) bool { counts[e.ID] = e.Count; return true })
	return counts, ld
}

// TestPersistenceCloseError: Close returns the failure of the last
// snapshot; a restart then finds the state the directory last held.
func TestPersistenceCloseError(t *testing.T) {
	ctx := context.Background()
	clk, dir, fsys := newFakeClock(), t.TempDir(), &failingFS{}
	lim, err := startPersisted(t, clk, dir, actorlimit.PersistConfig{FS: fsys})
	require.NoError(t, err)
	p := actorlimit.Policy{Limit: 10, Period: time.Hour}
	_, err = lim.Hit(ctx, "a", p)
	require.NoError(t, err)
	require.Eventually(t, func() bool { // flushed
		clk.Advance(persist.DefaultFlushEvery)
		got, _ := loadCopy(t, dir)
		return got["a"] == 1
	}, 10*time.Second, 10*time.Millisecond)
	_, err = lim.Hit(ctx, "a", p)
	require.NoError(t, err)

	fsys.fail.Store(true)
	err = lim.Close()
	require.ErrorIs(t, err, errInjected)
	assert.Equal(t, err, lim.Close(), "the same error again")

	lim, err = startPersisted(t, clk, dir, actorlimit.PersistConfig{})
	require.NoError(t, err)
	res, err := lim.Peek(ctx, "a", p)
	require.NoError(t, err)
	assert.Equal(t, int64(1), res.Count, "the second hit was not written")
}

// TestPersistenceCloseWhileHitting: callers hit their own keys as fast as
// they can while the limiter closes; every hit answered without error is in
// the state the next limiter loads, and no hit answered with ErrClosed is.
func TestPersistenceCloseWhileHitting(t *testing.T) {
	ctx := context.Background()
	p := actorlimit.Policy{Limit: 1 << 40, Period: time.Hour}
	const callers = 4
	for round := range 20 {
		clk, dir := newFakeClock(), t.TempDir()
		lim, err := startPersisted(t, clk, dir, actorlimit.PersistConfig{})
		require.NoError(t, err)
		var answered [callers]int64
		var going, wg sync.WaitGroup
		going.Add(callers)
		for c := range callers {
			wg.Go(func() {
				id := fmt.Sprintf("caller-%d", c)
				var once sync.Once // going: after 50 hits, or when the caller stops
				defer once.Do(going.Done)
				for i := 0; ; i++ {
					if i == 50 {
						once.Do(going.Done)
					}
					_, err := lim.Hit(ctx, id, p)
					if errors.Is(err, actorlimit.ErrClosed) {
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
					answered[c]++
				}
			})
		}
		going.Wait()
		require.NoError(t, lim.Close())
		wg.Wait()

		lim, err = startPersisted(t, clk, dir, actorlimit.PersistConfig{})
		require.NoError(t, err)
		for c := range callers {
			res, err := lim.Peek(ctx, fmt.Sprintf("caller-%d", c), p)
			require.NoError(t, err)
			require.Equal(t, answered[c], res.Count, "round %d, caller %d: hits answered, hits loaded", round, c)
		}
		require.NoError(t, lim.Close())
	}
}
