package actorlimit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/internal/testkit"
	"github.com/actorlimit/actorlimit/persist"
	"github.com/actorlimit/actorlimit/table"
)

// The kill test's setting, shared by the parent and its child.
const (
	killEnv   = "ACTORLIMIT_KILL_CHILD_DIR"
	killFlush = 20 * time.Millisecond
	// killSnapshot is far longer than the run: the only snapshot is the
	// empty one Start writes, so every count restored comes from the log.
	killSnapshot = time.Hour
	// killLimit is never reached before the kill (an id takes well under a
	// million hits in killAfter): every hit told was allowed and counted,
	// and after the restart the hits still allowed are exactly what the
	// restored count leaves of it.
	killLimit   = 1 << 30
	killCallers = 4
	// killAfter is how long the child runs under load before the parent
	// kills it: many flushes.
	killAfter = 700 * time.Millisecond
	// killSlack is what the bound adds to the flush interval: the flush
	// request waits in the limiter's mailbox behind the callers' messages
	// before the limiter hands the records over, and the writer goroutine
	// waits for a processor to write them, while the four callers keep
	// this machine's two busy (its ticker drops the ticks it is late
	// for). Measured here, the oldest lost decision was told up to 21 ms
	// before the kill, and up to 52 ms under -race with two more processes
	// spinning on the two processors, as when CI runs test binaries side
	// by side. Three flush intervals leave room for that. A log that is not
	// written loses decisions told up to killAfter before the kill; one
	// written every eighth flush interval, up to 160 ms.
	killSlack = 3 * killFlush
	// killBound is the most a decision can have been told before the kill
	// and still be lost.
	killBound = killFlush + killSlack

	// killSnapEnv makes the child hold killKeys keys and take a snapshot
	// every killSnapEvery, each of whose fsyncs takes killSlowSync longer
	// than the disk's: the parent kills it killInSnapshot after it sees
	// "snapshot.tmp", while the file is written.
	killSnapEnv    = "ACTORLIMIT_KILL_CHILD_SNAPSHOT"
	killKeys       = 1_000_000
	killSnapEvery  = 100 * time.Millisecond
	killSlowSync   = time.Second
	killInSnapshot = 250 * time.Millisecond
)

var killPolicy = actorlimit.Policy{Limit: killLimit, Period: time.Hour}

var killIDs = []string{"hot", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}

// TestKill9Child is the child process of TestKill9: it runs only when the
// parent sets killEnv. Its callers hit the limiter without pause and write
// the decisions they are told to stdout, one line per decision: "id allowed
// count unix-ns", a few lines at a time (whole lines, in atomic writes), so
// that the pipe does not slow the callers down, until the parent kills the
// process.
func TestKill9Child(t *testing.T) {
	dir := os.Getenv(killEnv)
	if dir == "" {
		return // not the child
	}
	pc := actorlimit.PersistConfig{FlushEvery: killFlush, SnapshotEvery: killSnapshot}
	slow := &slowDisk{FS: persist.OS}
	if os.Getenv(killSnapEnv) != "" {
		pc.SnapshotEvery, pc.FS = killSnapEvery, slow
	}
	lim, err := actorlimit.Start(actorlimit.WithClock(stoppedClock{}), actorlimit.WithJanitor(0, 0),
		actorlimit.WithPersistence(dir, pc))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	slow.armed.Store(true) // from the first snapshot after Start's
	hitAndTell(lim, killIDs)
}

// hitAndTell is a kill child's load: killCallers callers hit lim without
// pause, half of their hits on ids[0], and write each decision they are
// told to stdout, "id allowed count unix-ns", a few whole lines at a time
// in atomic writes, until the process is killed.
func hitAndTell(lim *actorlimit.Limiter, ids []string) {
	var wg sync.WaitGroup
	for c := range killCallers {
		wg.Go(func() {
			var lines, line []byte
			for i := c; ; i++ {
				id := ids[0]
				if i%2 == 1 {
					id = ids[1+(i/2)%(len(ids)-1)]
				}
				res, err := lim.Hit(context.Background(), id, killPolicy)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				line = fmt.Appendf(line[:0], "%s %t %d %d\n", id, res.Allowed, res.Count, time.Now().UnixNano())
				if len(lines)+len(line) > testkit.PipeBuf {
					if _, err := os.Stdout.Write(lines); err != nil {
						os.Exit(2)
					}
					lines = lines[:0]
				}
				lines = append(lines, line...)
			}
		})
	}
	wg.Wait()
}

// TestKill9 runs a limiter with persistence in a child process under load,
// kills it with SIGKILL, starts a limiter on the same directory and
// compares its counts with what the child's callers were told. Every
// decision told more than killBound (four flush intervals) before the kill
// must be in the restored count: the hits lost are at most those told
// within killBound of the kill, and so the hits allowed before and after
// the restart are at most the limit plus those. In "log", the child takes
// no snapshot but the empty one at its start, so the counts come back from
// the log alone. In "during a snapshot", the child holds a million more
// keys and takes a snapshot every killSnapEvery on a disk whose snapshot
// fsync takes a second more, and is killed while one is written: the log
// must have gone on meanwhile.
func TestKill9(t *testing.T) {
	if os.Getenv(killEnv) != "" {
		return
	}
	for _, c := range []struct {
		name     string
		snapshot bool
	}{{"log", false}, {"during a snapshot", true}} {
		t.Run(c.name, func(t *testing.T) { testKill9(t, c.snapshot) })
	}
}

func testKill9(t *testing.T, snapshot bool) {
	dir := t.TempDir()
	gen := uint64(1) // the generation of the snapshot the child's Start writes
	if snapshot {
		fillDir(t, dir, killKeys)
		gen = 2
	}
	k := runKillChild(t, dir, snapshot)
	byID := testkit.ParseTold(t, k.Data)
	if snapshot {
		_, err := os.Stat(filepath.Join(dir, "snapshot.tmp"))
		require.NoError(t, err, "killed while a snapshot was written")
	}

	// the restart loads the snapshot the child's Start wrote, and a log
	ctx := context.Background()
	lim, err := actorlimit.Start(actorlimit.WithClock(restartClock{}), actorlimit.WithJanitor(0, 0),
		actorlimit.WithPersistence(dir, actorlimit.PersistConfig{}))
	require.NoError(t, err)
	defer lim.Close()
	st, err := lim.Stats(ctx)
	require.NoError(t, err)
	ld := st.Loaded
	require.Equal(t, gen, ld.Generation, "no snapshot in place but the one the child's Start wrote")
	if snapshot {
		require.Equal(t, killKeys, ld.Skipped, "the keys the child held, whose window has ended")
	}
	bound, stall := checkRestored(t, lim, byID, killIDs, k.Killed)
	// one frame a flush interval; at least one each bound, whatever the
	// phase of the kill
	require.GreaterOrEqual(t, ld.Frames, int(k.Killed.Sub(k.Started)/(bound+testkit.Stalled(byID, k.Started, k.Killed, killFlush))),
		"the counts come from the log, written every %v", killFlush)
	t.Logf("after kill -9: %d log frames loaded (bound %v: flush %v + slack %v + the child's stall %v)",
		ld.Frames, bound, killFlush, killSlack, stall)
}

// checkRestored compares the counts of lim, restarted after the child was
// killed at killed, with what the child's callers were told of ids (byID):
// every decision told more than the bound before the kill is in the
// restored count, so the hits lost are at most those told within the
// bound, and the hits allowed before and after the restart are at most
// the limit plus those. The bound is killBound, plus the longest the child
// stalled in the second before the kill (a process that does not run
// writes no log: on a loaded machine it may not run at all for a while),
// measured from what its callers were told. It returns the bound and the
// stall.
func checkRestored(t *testing.T, lim *actorlimit.Limiter, byID map[string]*testkit.Told, ids []string, killed time.Time) (bound, stall time.Duration) {
	t.Helper()
	ctx := context.Background()
	stall = testkit.Stalled(byID, killed.Add(-time.Second), killed, killFlush)
	bound = killBound + stall
	lostHits, lostFor := 0, time.Duration(0)
	for _, id := range ids {
		tl := byID[id]
		require.NotNil(t, tl, id)
		require.Equal(t, len(tl.Counts), tl.Allowed, "%s: the limit is never reached before the kill", id)
		res, err := lim.Peek(ctx, id, killPolicy)
		require.NoError(t, err)
		restored := res.Count
		// The hits told (a caller's last few lines die unwritten with the
		// child: those decisions are not checked) within the bound before
		// the kill, and those lost, whose count is above the restored one.
		within, lost := 0, 0
		var oldest time.Duration // how long before the kill the oldest lost one was told
		for i, c := range tl.Counts {
			ago := killed.Sub(time.Unix(0, tl.At[i]))
			if ago < bound {
				within++
			}
			if c > restored {
				lost++
				oldest = max(oldest, ago)
			}
		}
		assert.Less(t, oldest, bound, "%s: a count told %v before the kill is lost (restored %d of %d; bound %v with a stall of %v)", id, oldest, restored, maxOf(tl.Counts), bound, stall)
		assert.LessOrEqual(t, lost, within, "%s: %d hits told lost, %d told within %v of the kill", id, lost, within, bound)
		lostFor, lostHits = max(lostFor, oldest), max(lostHits, lost)

		// never more allowed than the limit plus the hits of the bound
		after := res.Remaining
		if after > 0 {
			r, err := lim.HitN(ctx, id, killPolicy, after)
			require.NoError(t, err)
			require.True(t, r.Allowed, "%s: the %d hits Peek says remain", id, after)
		}
		r, err := lim.Hit(ctx, id, killPolicy)
		require.NoError(t, err)
		require.False(t, r.Allowed, "%s: one more than Peek said", id)
		assert.LessOrEqual(t, int64(tl.Allowed)+after, killLimit+int64(within), "%s: allowed %d before, %d after", id, tl.Allowed, after)
	}
	t.Logf("lost at most %d told hits of one id, the oldest told %v before the kill (bound %v)", lostHits, lostFor, bound)
	return bound, stall
}

// runKillChild runs TestKill9Child on dir and kills it: killAfter after its
// first output, or with snapshot, killInSnapshot after "snapshot.tmp"
// appears once it is under load.
func runKillChild(t *testing.T, dir string, snapshot bool) testkit.Killed {
	t.Helper()
	c := testkit.Child{Test: "^TestKill9Child$", Env: []string{killEnv + "=" + dir}, GiveUp: killGiveUp}
	c.Due = func(started time.Time) bool { return time.Since(started) >= killAfter }
	if snapshot {
		c.Env = append(c.Env, killSnapEnv+"=1")
		tmp := filepath.Join(dir, "snapshot.tmp")
		var tmpSeen time.Time
		c.Due = func(time.Time) bool {
			if tmpSeen.IsZero() {
				if _, err := os.Stat(tmp); err == nil {
					tmpSeen = time.Now()
				}
				return false
			}
			return time.Since(tmpSeen) >= killInSnapshot
		}
	}
	k := testkit.RunChild(t, c)
	require.False(t, k.GaveUp, "no snapshot was written in %v", killGiveUp)
	return k
}

// killGiveUp is how long the parent waits for the moment to kill before it
// gives up: never, unless the child stopped taking snapshots.
const killGiveUp = 2 * time.Minute

// restartClock is the time of the limiter restarted after the kill: two
// minutes after the child's stopped clock, in the same hour-long window of
// the ids the child's callers hit, after the minute-long window of the
// keys fillDir leaves, so that the restart skips those (it reads them, but
// neither applies them nor writes them again).
type restartClock struct{}

func (restartClock) Now() time.Time { return stoppedClock{}.Now().Add(2 * time.Minute) }

// fillDir leaves in dir a snapshot of n keys, "fill0" and on, each with one
// hit in a minute-long fixed window at the stopped clock's time.
func fillDir(t *testing.T, dir string, n int) {
	t.Helper()
	now := stoppedClock{}.Now().UnixNano()
	tb := table.New(0)
	c := algo.Check{Algorithm: algo.FixedWindow, Period: time.Minute, Limit: 10, ID: "fill", N: 1}
	tb.Apply(&c, now)
	rec := tb.Record(&c)
	j, err := persist.New(dir, persist.Config{})
	require.NoError(t, err)
	_, err = j.Load(now, func(algo.Record) error { return nil })
	require.NoError(t, err)
	j.Start(func(yield func(algo.Record) bool) {
		for i := range n {
			rec.ID = "fill" + strconv.Itoa(i)
			if !yield(rec) {
				return
			}
		}
	}, func() {}, func() {})
	require.NoError(t, j.Close())
}

// slowDisk is the operating system's file system on which, once armed, a
// snapshot's fsync takes killSlowSync longer: a disk slow to make a large
// snapshot durable.
type slowDisk struct {
	persist.FS
	armed atomic.Bool
}

func (d *slowDisk) Create(name string) (persist.File, error) {
	f, err := d.FS.Create(name)
	if err != nil || !d.armed.Load() || filepath.Base(name) != "snapshot.tmp" {
		return f, err
	}
	return slowSync{f}, nil
}

type slowSync struct{ persist.File }

func (f slowSync) Sync() error {
	time.Sleep(killSlowSync) // the slow disk, not a wait of the test's
	return f.File.Sync()
}

func maxOf(s []int64) int64 {
	m := int64(0)
	for _, v := range s {
		m = max(m, v)
	}
	return m
}
