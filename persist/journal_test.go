package persist_test

import (
	"errors"
	"iter"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/persist"
	"github.com/actorlimit/actorlimit/table"
)

// Intervals of the writer in these tests; each has its own manual ticker.
const (
	flushEvery = 1 * time.Second
	syncEvery  = 2 * time.Second
	snapEvery  = 3 * time.Second
)

// t0 is the tests' time, Unix ns: windows of a second are whole at it.
const t0 = int64(1_700_000_000) * int64(time.Second)

// tickers is a set of tickers moved by hand, one per interval.
type tickers struct {
	t  testing.TB
	mu sync.Mutex
	m  map[time.Duration]chan time.Time
}

// tickWait is how long tick waits for the writer to take a tick, and the
// rig's cleanup for the writer to stop: a writer stuck on its work fails
// the test then, instead of hanging it until the test binary's timeout.
const tickWait = 30 * time.Second

type manualTicker struct{ c chan time.Time }

func (m manualTicker) C() <-chan time.Time { return m.c }
func (m manualTicker) Stop()               {}

func (ts *tickers) new(d time.Duration) persist.Ticker {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	c := make(chan time.Time) // unbuffered: a send is taken by the writer
	ts.m[d] = c
	return manualTicker{c}
}

// tick fires d's ticker and returns once the writer has done what the tick
// asks: its second tick is taken only when the first one's work is over.
// A tick not taken in tickWait fails the test.
func (ts *tickers) tick(d time.Duration) {
	ts.t.Helper()
	ts.mu.Lock()
	c := ts.m[d]
	ts.mu.Unlock()
	deadline := time.NewTimer(tickWait)
	defer deadline.Stop()
	for i := range 2 {
		select {
		case c <- time.Time{}:
		case <-deadline.C:
			ts.t.Fatalf("the writer did not take tick %d of %v in %v: stuck", i+1, d, tickWait)
		}
	}
}

// rig is a Journal on a table, as the limiter drives them.
type rig struct {
	t    *testing.T
	dir  string
	tb   *table.Table
	j    *persist.Journal
	tick *tickers
	asks int // snapshots asked for
	mu   sync.Mutex
	ends chan struct{} // a snapshot ended, written or not
}

func newRig(t *testing.T, dir string, cfg persist.Config) (*rig, persist.Loaded, error) {
	t.Helper()
	r := &rig{t: t, dir: dir, tb: table.New(0), tick: &tickers{t: t, m: map[time.Duration]chan time.Time{}}}
	cfg.FlushEvery, cfg.SyncEvery, cfg.SnapshotEvery = flushEvery, syncEvery, snapEvery
	cfg.NewTicker = r.tick.new
	j, err := persist.New(dir, cfg)
	require.NoError(t, err)
	r.j = j
	r.ends = make(chan struct{}, 64)
	persist.OnSnapshot(j, func() { r.ends <- struct{}{} })
	ld, err := j.Load(t0, func(rec algo.Record) error { return r.tb.Load(t0, rec) })
	if err != nil {
		return r, ld, err
	}
	j.Start(r.records(), func() { r.mu.Lock(); r.asks++; r.mu.Unlock() }, func() {})
	t.Cleanup(func() {
		closed := make(chan struct{})
		go func() { _ = j.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(tickWait):
			t.Errorf("the writer did not stop in %v: stuck", tickWait)
		}
	})
	r.snapshotted() // Start's, written before Start returns
	return r, ld, nil
}

// snapshotted waits until the writer has ended a snapshot: renamed its
// file into place and made its log the current one, or given it up.
func (r *rig) snapshotted() {
	r.t.Helper()
	select {
	case <-r.ends:
	case <-time.After(10 * time.Second):
		r.t.Fatal("no snapshot ended")
	}
}

func (r *rig) asked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asks
}

func (r *rig) records() iter.Seq[algo.Record] {
	return func(yield func(algo.Record) bool) { r.tb.Snapshot(t0, yield) }
}

// hit applies one batch of fixed-window hits and commits it.
func (r *rig) hit(ids ...string) {
	for _, id := range ids {
		c := algo.Check{Algorithm: algo.FixedWindow, Period: time.Hour, Limit: 100, ID: id, N: 1}
		r.tb.Apply(&c, t0)
		r.j.Append(r.tb.Record(&c))
	}
	r.j.Commit()
}

// counts returns every key's count in tb.
func counts(tb *table.Table) map[string]int64 {
	m := map[string]int64{}
	tb.Ascend(func(e table.Entry) bool { m[e.ID] = e.Count; return true })
	return m
}

// reload loads dir into a fresh table, as a restarted process does.
func reload(t *testing.T, dir string, cfg persist.Config) (map[string]int64, persist.Loaded, error) {
	t.Helper()
	j, err := persist.New(dir, cfg)
	require.NoError(t, err)
	tb := table.New(0)
	ld, err := j.Load(t0, func(rec algo.Record) error { return tb.Load(t0, rec) })
	return counts(tb), ld, err
}

func TestJournalLogThenSnapshot(t *testing.T) {
	dir := t.TempDir()
	r, ld, err := newRig(t, dir, persist.Config{})
	require.NoError(t, err)
	assert.Equal(t, persist.Loaded{}, ld)

	r.hit("a", "b")
	r.hit("a")
	r.tick.tick(flushEvery)
	got, ld, err := reload(t, dir, persist.Config{})
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"a": 2, "b": 1}, got)
	assert.Equal(t, 0, ld.TornBytes)

	r.tick.tick(snapEvery)
	assert.GreaterOrEqual(t, r.asked(), 1, "the snapshot ticker asks the limiter")
	r.j.Snapshot(r.records())
	r.snapshotted()
	r.hit("c")
	r.tick.tick(flushEvery)
	got, ld, err = reload(t, dir, persist.Config{})
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"a": 2, "b": 1, "c": 1}, got)
	assert.Equal(t, uint64(2), ld.Generation, "the first snapshot at Start, the second asked")
	assert.Equal(t, 1, ld.Frames, "the log after the snapshot holds only c")
	_, err = os.Stat(filepath.Join(dir, "log-0000000000000001"))
	assert.True(t, errors.Is(err, os.ErrNotExist), "the compacted log is removed")
	st := r.j.Stats()
	assert.Equal(t, uint64(2), st.Snapshots)
	assert.Equal(t, uint64(0), st.Errors+st.Dropped)
}

// TestJournalSnapshotInChunks takes a snapshot a key at a time, with hits
// between the chunks, as the limiter does: until the snapshot is written,
// the last snapshot and log hold every hit flushed, the hits made while it
// is taken included; once it is written, it and the log that follows it
// hold them all, a key hit after its own chunk included.
func TestJournalSnapshotInChunks(t *testing.T) {
	dir := t.TempDir()
	r, _, err := newRig(t, dir, persist.Config{})
	require.NoError(t, err)
	r.hit("a", "b")
	r.tick.tick(flushEvery)

	var cur algo.Cursor
	chunk := func() bool {
		return r.tb.SnapshotChunk(t0, &cur, 1, func(rec algo.Record) bool { r.j.SnapshotRecord(rec); return true })
	}
	require.True(t, r.j.BeginSnapshot())
	require.True(t, chunk(), "a")
	r.hit("b")
	r.hit("c")
	r.tick.tick(flushEvery)
	got, ld, err := reload(t, dir, persist.Config{})
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"a": 1, "b": 2, "c": 1}, got, "a kill now loses nothing flushed")
	assert.Equal(t, uint64(1), ld.Generation)

	r.hit("a") // after its chunk: the snapshot has a at 1
	for chunk() {
	}
	r.j.EndSnapshot()
	r.snapshotted()
	r.tick.tick(flushEvery)
	got, ld, err = reload(t, dir, persist.Config{})
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"a": 2, "b": 2, "c": 1}, got)
	assert.Equal(t, uint64(2), ld.Generation)
	// The snapshot holds a, b and c (a as of its chunk); the log that
	// follows it holds the three hits made while it was taken, b, c and a,
	// in as many frames as the writer happened to flush: the records, not
	// the frames, are what a restart relies on.
	assert.Equal(t, 3+3, ld.Records, "the snapshot's a, b, c, then the log's b, c, a")
	assert.GreaterOrEqual(t, ld.Frames, 1)
	_, err = os.Stat(filepath.Join(dir, "log-0000000000000001"))
	assert.True(t, errors.Is(err, os.ErrNotExist), "the compacted log is removed")
	assert.Equal(t, uint64(0), r.j.Stats().Errors+r.j.Stats().Dropped)
}

func TestJournalSkipsDeadState(t *testing.T) {
	dir := t.TempDir()
	r, _, err := newRig(t, dir, persist.Config{})
	require.NoError(t, err)
	r.hit("a")
	require.NoError(t, r.j.Close())
	j, err := persist.New(dir, persist.Config{})
	require.NoError(t, err)
	later := t0 + int64(time.Hour) // the hour-long window of a ended
	ld, err := j.Load(later, func(rec algo.Record) error {
		t.Errorf("applied %+v", rec)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 1, ld.Skipped)
}

func TestJournalQueueFull(t *testing.T) {
	dir := t.TempDir()
	r, _, err := newRig(t, dir, persist.Config{MaxPending: 64})
	require.NoError(t, err)
	r.hit("a")
	r.hit("b", "c", "d", "e", "f") // more than 64 bytes: dropped
	st := r.j.Stats()
	assert.Equal(t, uint64(5), st.Dropped)
	assert.Equal(t, uint64(0), st.Errors)
	r.tick.tick(syncEvery)
	assert.GreaterOrEqual(t, r.asked(), 1, "a snapshot is asked for to cover what was dropped")
	r.j.Snapshot(r.records())
	r.snapshotted()
	r.tick.tick(syncEvery)
	asked := r.asked()
	r.tick.tick(syncEvery)
	assert.Equal(t, asked, r.asked(), "no more once a snapshot began")
	r.tick.tick(flushEvery)
	got, _, err := reload(t, dir, persist.Config{})
	require.NoError(t, err)
	assert.Len(t, got, 6)
}

func TestJournalCloseWritesEverything(t *testing.T) {
	dir := t.TempDir()
	r, _, err := newRig(t, dir, persist.Config{})
	require.NoError(t, err)
	r.hit("a", "b")
	r.j.Snapshot(r.records())
	r.hit("a")
	require.NoError(t, r.j.Close())
	got, ld, err := reload(t, dir, persist.Config{})
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"a": 2, "b": 1}, got)
	assert.Equal(t, 1, ld.Frames)
}

func TestJournalResetDeletes(t *testing.T) {
	dir := t.TempDir()
	r, _, err := newRig(t, dir, persist.Config{})
	require.NoError(t, err)
	r.hit("a", "b")
	r.j.Snapshot(r.records())
	c := algo.Check{Op: algo.OpReset, Algorithm: algo.FixedWindow, Period: time.Hour, ID: "a"}
	r.tb.Apply(&c, t0)
	r.j.Append(r.tb.Record(&c))
	r.j.Commit()
	require.NoError(t, r.j.Close())
	got, _, err := reload(t, dir, persist.Config{})
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"b": 1}, got)
}

// TestJournalFailedSnapshot makes a snapshot's writing fail: the last
// snapshot and log stay whole and loadable, the failure is counted, the
// records of the failing moment are dropped and counted, and the next
// snapshot, once the disk works, covers them.
func TestJournalFailedSnapshot(t *testing.T) {
	mfs := newMemFS()
	cfg := persist.Config{FS: mfs}
	r, _, err := newRig(t, "d", cfg)
	require.NoError(t, err)
	r.hit("a", "b")
	r.tick.tick(flushEvery)

	mfs.fail.Store(true)
	r.j.Snapshot(r.records())
	r.hit("c") // for the log after the snapshot, which cannot be made
	r.tick.tick(flushEvery)
	r.snapshotted()
	st := r.j.Stats()
	assert.Positive(t, st.Errors)
	assert.Equal(t, uint64(1), st.Dropped, "c")
	got, ld, err := reload(t, "d", persist.Config{FS: mfs, StartUnwritable: true}) // the disk still fails
	require.NoError(t, err, "the last snapshot and its log are intact")
	assert.Equal(t, map[string]int64{"a": 1, "b": 1}, got)
	assert.ErrorIs(t, ld.Unwritable, errDisk)

	mfs.fail.Store(false)
	r.tick.tick(syncEvery)
	require.GreaterOrEqual(t, r.asked(), 1, "a snapshot is asked for again")
	r.j.Snapshot(r.records())
	r.snapshotted()
	r.tick.tick(flushEvery)
	got, _, err = reload(t, "d", cfg)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"a": 1, "b": 1, "c": 1}, got)
}

// TestJournalCloseError: Close returns the failure of the last snapshot,
// the same at every call; a snapshot that failed before a last one that
// was written is no error of Close.
func TestJournalCloseError(t *testing.T) {
	mfs := newMemFS()
	r, _, err := newRig(t, "d", persist.Config{FS: mfs})
	require.NoError(t, err)
	r.hit("a")
	mfs.fail.Store(true)
	r.j.Snapshot(r.records())
	r.tick.tick(flushEvery) // fails
	r.snapshotted()
	mfs.fail.Store(false)
	r.j.Snapshot(r.records())
	require.NoError(t, r.j.Close(), "the last snapshot was written")

	r, _, err = newRig(t, "e", persist.Config{FS: mfs})
	require.NoError(t, err)
	r.hit("a")
	mfs.fail.Store(true)
	r.j.Snapshot(r.records())
	err = r.j.Close()
	require.ErrorIs(t, err, errDisk)
	assert.ErrorContains(t, err, "last snapshot")
	assert.Equal(t, err, r.j.Close(), "the same error again")
}

// TestJournalDirSyncFails: a snapshot renamed into place whose directory
// fsync fails is the state from then on, with its log after it: the
// records committed after it are not lost to the last log.
func TestJournalDirSyncFails(t *testing.T) {
	mfs := newMemFS()
	r, _, err := newRig(t, "d", persist.Config{FS: mfs})
	require.NoError(t, err)
	r.hit("a")
	r.tick.tick(flushEvery)

	require.True(t, r.j.BeginSnapshot())
	r.tick.tick(flushEvery) // the writer opens the log to follow it
	for rec := range r.records() {
		r.j.SnapshotRecord(rec)
	}
	mfs.failDir.Store(true) // from the rename on
	r.j.EndSnapshot()
	r.snapshotted()
	r.hit("b")
	r.tick.tick(flushEvery)
	assert.Positive(t, r.j.Stats().Errors, "the failed fsync is counted")
	got, ld, err := reload(t, "d", persist.Config{FS: mfs, StartUnwritable: true})
	require.NoError(t, err)
	assert.Equal(t, uint64(2), ld.Generation, "the snapshot renamed")
	assert.Equal(t, map[string]int64{"a": 1, "b": 1}, got)
}
