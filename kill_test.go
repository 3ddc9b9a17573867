package actorlimit_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
)

// The kill test's setting, shared by the parent and its child.
const (
	killEnv      = "ACTORLIMIT_KILL_CHILD_DIR"
	killFlush    = 20 * time.Millisecond
	killSnapshot = 150 * time.Millisecond
	killLimit    = 400
	killCallers  = 4
	// killAfter is how long the child runs under load before the parent
	// kills it: several snapshots and many flushes.
	killAfter = 700 * time.Millisecond
)

var killPolicy = actorlimit.Policy{Limit: killLimit, Period: time.Hour}

var killIDs = []string{"hot", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}

// TestKill9Child is the child process of TestKill9: it runs only when the
// parent sets killEnv. Its callers hit the limiter without pause and write
// every decision they are told to stdout, one line per decision:
// "id allowed count unix-ns", until the parent kills the process.
func TestKill9Child(t *testing.T) {
	dir := os.Getenv(killEnv)
	if dir == "" {
		return // not the child
	}
	lim, err := actorlimit.Start(actorlimit.WithClock(stoppedClock{}), actorlimit.WithJanitor(0, 0),
		actorlimit.WithPersistence(dir, actorlimit.PersistConfig{FlushEvery: killFlush, SnapshotEvery: killSnapshot}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var wg sync.WaitGroup
	for c := range killCallers {
		wg.Go(func() {
			var line []byte
			for i := c; ; i++ {
				id := "hot"
				if i%2 == 1 {
					id = killIDs[1+(i/2)%(len(killIDs)-1)]
				}
				res, err := lim.Hit(context.Background(), id, killPolicy)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				line = fmt.Appendf(line[:0], "%s %t %d %d\n", id, res.Allowed, res.Count, time.Now().UnixNano())
				if _, err := os.Stdout.Write(line); err != nil { // one write: whole lines
					os.Exit(2)
				}
			}
		})
	}
	wg.Wait()
}

// told is what the child's callers were told about one id.
type told struct {
	allowed int
	counts  []int64 // each decision's count, in the order told
	at      []int64 // when each was told, Unix ns
}

// TestKill9 runs a limiter with persistence in a child process under load,
// kills it with SIGKILL, starts a limiter on the same directory and
// compares its counts with what the child's callers were told: every
// decision told more than the loss bound (the flush interval, plus a margin
// for a loaded machine) before the kill is in the restored count, and the
// hits allowed before and after the restart are at most the limit plus
// those lost.
func TestKill9(t *testing.T) {
	if os.Getenv(killEnv) != "" {
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Child$", "-test.count=1")
	cmd.Env = append(os.Environ(), killEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	byID := map[string]*told{}
	sc := bufio.NewScanner(out)
	lines := 0
	var started, killed time.Time
	for sc.Scan() {
		if started.IsZero() {
			started = time.Now() // the child is up and under load
		}
		f := strings.Fields(sc.Text())
		require.Len(t, f, 4, "line %q", sc.Text())
		tl := byID[f[0]]
		if tl == nil {
			tl = &told{}
			byID[f[0]] = tl
		}
		if f[1] == "true" {
			tl.allowed++
		}
		count, err1 := strconv.ParseInt(f[2], 10, 64)
		at, err2 := strconv.ParseInt(f[3], 10, 64)
		require.NoError(t, err1)
		require.NoError(t, err2)
		tl.counts, tl.at = append(tl.counts, count), append(tl.at, at)
		if lines++; killed.IsZero() && time.Since(started) >= killAfter {
			killed = time.Now()
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		}
	}
	werr := cmd.Wait()
	require.False(t, killed.IsZero(), "the child stopped after %d lines: %v", lines, werr)
	t.Logf("child killed after %v; %d told decisions read", killed.Sub(started), lines)

	ctx := context.Background()
	lim, err := actorlimit.Start(actorlimit.WithClock(stoppedClock{}), actorlimit.WithJanitor(0, 0),
		actorlimit.WithPersistence(dir, actorlimit.PersistConfig{}))
	require.NoError(t, err)
	defer lim.Close()

	bound := killFlush + 250*time.Millisecond // the flush interval and a margin
	var lostHits int64
	var lostFor time.Duration
	for _, id := range killIDs {
		tl := byID[id]
		require.NotNil(t, tl, id)
		res, err := lim.Peek(ctx, id, killPolicy)
		require.NoError(t, err)
		restored := res.Count
		// the first decision told whose count is not in the restored state
		for i, c := range tl.counts {
			if c > restored {
				lostHits = max(lostHits, maxOf(tl.counts)-restored)
				lostFor = max(lostFor, killed.Sub(time.Unix(0, tl.at[i])))
				assert.Less(t, killed.Sub(time.Unix(0, tl.at[i])), bound,
					"%s: count %d told %v before the kill is lost (restored %d)", id, c, killed.Sub(time.Unix(0, tl.at[i])), restored)
				break
			}
		}
		// never more allowed than the limit plus what was lost
		after := 0
		for {
			r, err := lim.Hit(ctx, id, killPolicy)
			require.NoError(t, err)
			if !r.Allowed {
				break
			}
			after++
		}
		lost := max(0, maxOf(tl.counts)-restored)
		assert.LessOrEqual(t, int64(tl.allowed+after), killLimit+lost, "%s: allowed %d before, %d after", id, tl.allowed, after)
	}
	t.Logf("after kill -9: lost at most %d hits of one id, told at most %v before the kill (bound %v + margin)", lostHits, lostFor, killFlush)
}

func maxOf(s []int64) int64 {
	m := int64(0)
	for _, v := range s {
		m = max(m, v)
	}
	return m
}
