package actorlimit_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/persist"
)

// awaitFor bounds how long the tests below wait for the writer to take a
// tick or report a write: never reached unless the writer is stuck, which
// is the failure they look for.
const awaitFor = 10 * time.Second

// manualTickers makes the writer's tickers, one per interval, moved by
// hand: a tick is taken by the writer when the test sends it.
type manualTickers struct {
	mu sync.Mutex
	m  map[time.Duration]chan time.Time
}

type manualTicker struct{ c chan time.Time }

func (m manualTicker) C() <-chan time.Time { return m.c }
func (m manualTicker) Stop()               {}

func (ts *manualTickers) new(d time.Duration) persist.Ticker {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m == nil {
		ts.m = map[time.Duration]chan time.Time{}
	}
	c := make(chan time.Time) // unbuffered: a send is taken by the writer
	ts.m[d] = c
	return manualTicker{c}
}

// tick fires d's ticker and returns once the writer has done what the
// tick asks (its second tick is taken only when the first one's work is
// over); it fails the test if the writer does not take them.
func (ts *manualTickers) tick(t *testing.T, d time.Duration) {
	t.Helper()
	ts.mu.Lock()
	c := ts.m[d]
	ts.mu.Unlock()
	require.NotNil(t, c, "no ticker of %v", d)
	for range 2 {
		select {
		case c <- time.Time{}:
		case <-time.After(awaitFor):
			t.Fatalf("the writer took no %v tick in %v: it is stuck", d, awaitFor)
		}
	}
}

// slowSyncFS is the operating system's file system whose fsync of a
// snapshot's file, once armed, reports that it began and waits until the
// test releases it: a disk slow to make a snapshot durable. It reports the
// writes and fsyncs of every file, and renames.
type slowSyncFS struct {
	persist.FS
	armed   atomic.Bool
	syncing chan struct{} // a snapshot's fsync began, armed
	release chan struct{} // closed: the armed fsync ends
	ops     chan string   // "write NAME", "sync NAME", "rename NAME"
}

func newSlowSyncFS() *slowSyncFS {
	return &slowSyncFS{
		FS:      persist.OS,
		syncing: make(chan struct{}, 1),
		release: make(chan struct{}),
		ops:     make(chan string, 1<<12),
	}
}

func (f *slowSyncFS) note(op, name string) {
	select {
	case f.ops <- op + " " + filepath.Base(name):
	default: // nobody waits for so many
	}
}

func (f *slowSyncFS) Create(name string) (persist.File, error) {
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &slowSyncFile{File: file, fs: f, name: name}, nil
}

func (f *slowSyncFS) Rename(oldName, newName string) error {
	err := f.FS.Rename(oldName, newName)
	f.note("rename", newName)
	return err
}

// drain forgets the operations reported so far.
func (f *slowSyncFS) drain() {
	for {
		select {
		case <-f.ops:
		default:
			return
		}
	}
}

// await waits until op on the file name is reported, skipping the others.
func (f *slowSyncFS) await(t *testing.T, op, name string) {
	t.Helper()
	want := op + " " + name
	deadline := time.After(awaitFor)
	for {
		select {
		case got := <-f.ops:
			if got == want {
				return
			}
		case <-deadline:
			t.Fatalf("no %q in %v: the writer is stuck", want, awaitFor)
		}
	}
}

type slowSyncFile struct {
	persist.File
	fs   *slowSyncFS
	name string
}

func (f *slowSyncFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.fs.note("write", f.name)
	return n, err
}

func (f *slowSyncFile) Sync() error {
	if strings.HasSuffix(f.name, "snapshot.tmp") && f.fs.armed.Load() {
		f.fs.syncing <- struct{}{}
		<-f.fs.release
	}
	err := f.File.Sync()
	f.fs.note("sync", f.name)
	return err
}

const (
	log1 = "log-0000000000000001"
	log2 = "log-0000000000000002"
)

// TestPersistenceSlowSnapshotSync makes a snapshot's fsync hang, as a
// slow disk's does with a large snapshot: meanwhile the log's frames are
// written and fsynced on their ticks, so a copy of the directory taken
// then, as a process killed then would leave it, holds every hit flushed
// before, the hits made while the snapshot is written included. Once the
// fsync ends, the snapshot is renamed into place and its log holds them.
func TestPersistenceSlowSnapshotSync(t *testing.T) {
	ctx := context.Background()
	clk, dir, fsys, tk := newFakeClock(), t.TempDir(), newSlowSyncFS(), &manualTickers{}
	lim, err := startPersisted(t, clk, dir, actorlimit.PersistConfig{FS: fsys, NewTicker: tk.new})
	require.NoError(t, err)
	fsys.drain() // Start's snapshot and log header, written before it returned
	released := sync.OnceFunc(func() { close(fsys.release) })
	t.Cleanup(released) // before Close, which waits for the snapshot
	p := actorlimit.Policy{Limit: 100, Period: time.Hour}
	hit := func(id string, want int64) {
		t.Helper()
		res, err := lim.Hit(ctx, id, p)
		require.NoError(t, err)
		require.Equal(t, want, res.Count, id)
	}
	flush := func(log string) {
		t.Helper()
		tk.tick(t, persist.DefaultFlushEvery) // the limiter hands its changes over
		fsys.await(t, "write", log)
	}

	hit("a", 1)
	flush(log1)

	fsys.armed.Store(true)
	tk.tick(t, persist.DefaultSnapshotEvery) // the writer asks for a snapshot
	select {
	case <-fsys.syncing:
	case <-time.After(awaitFor):
		t.Fatal("the snapshot's fsync did not begin")
	}

	// the snapshot's fsync hangs; the log goes on
	hit("a", 2)
	hit("b", 1)
	flush(log1)
	tk.tick(t, persist.DefaultSyncEvery)
	fsys.await(t, "sync", log1)

	got, ld := loadCopy(t, dir) // a kill now
	assert.Equal(t, map[string]int64{"a": 2, "b": 1}, got, "the hits flushed while the snapshot is written")
	assert.Equal(t, uint64(1), ld.Generation, "the last snapshot, Start's")
	_, err = os.Stat(filepath.Join(dir, "snapshot.tmp"))
	require.NoError(t, err, "the copy was taken while the snapshot was written")

	released()
	fsys.await(t, "rename", "snapshot")
	hit("c", 1)
	flush(log2)
	got, ld = loadCopy(t, dir)
	assert.Equal(t, map[string]int64{"a": 2, "b": 1, "c": 1}, got)
	assert.Equal(t, uint64(2), ld.Generation, "the snapshot written, then its log")
	require.NoError(t, lim.Close())
}
