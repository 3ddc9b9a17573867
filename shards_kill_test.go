package actorlimit_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
)

// The sharded kill test runs as the kill test does (kill_test.go: its
// bound, policy and parsing), with a limiter of killShards shards.
const (
	killShardsEnv = "ACTORLIMIT_KILL_SHARDS_CHILD_DIR"
	killShards    = 2
)

// killShardIDs are the sharded child's ids: one hot, and enough others
// that both shards hold some, whatever the seed drawn.
var killShardIDs = func() []string {
	ids := []string{"hot"}
	for i := range 31 {
		ids = append(ids, fmt.Sprint("s", i))
	}
	return ids
}()

// TestKill9ShardsChild is the child process of TestKill9Shards: it runs
// only when the parent sets killShardsEnv. As TestKill9Child, with
// killShards shards: its callers hit the limiter without pause and write
// each decision they are told to stdout until the parent kills it.
func TestKill9ShardsChild(t *testing.T) {
	dir := os.Getenv(killShardsEnv)
	if dir == "" {
		return // not the child
	}
	lim, err := actorlimit.Start(actorlimit.WithClock(stoppedClock{}), actorlimit.WithJanitor(0, 0), actorlimit.WithShards(killShards),
		actorlimit.WithPersistence(dir, actorlimit.PersistConfig{FlushEvery: killFlush, SnapshotEvery: killSnapshot}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	hitAndTell(lim, killShardIDs)
}

// TestKill9Shards runs a limiter of killShards shards with persistence in a
// child process under load, kills it with SIGKILL, starts a limiter of as
// many shards on the same directory and compares its counts with what the
// child's callers were told, as TestKill9 does: every decision told more
// than killBound before the kill is in the restored count, on whichever
// shard the id is, and no more hits are allowed before and after the
// restart than the limit plus those told within killBound of the kill.
func TestKill9Shards(t *testing.T) {
	if os.Getenv(killShardsEnv) != "" || os.Getenv(killEnv) != "" {
		return
	}
	dir := t.TempDir()
	data, killed := runKillShardsChild(t, dir)
	byID := parseTold(t, data)

	ctx := context.Background()
	lim, err := actorlimit.Start(actorlimit.WithClock(stoppedClock{}), actorlimit.WithJanitor(0, 0), actorlimit.WithShards(killShards),
		actorlimit.WithPersistence(dir, actorlimit.PersistConfig{}))
	require.NoError(t, err)
	defer lim.Close()
	shards := map[string]bool{}
	for _, id := range killShardIDs {
		shards[lim.PIDFor(id).Id] = true
	}
	require.Len(t, shards, killShards, "the ids are not spread over the shards")

	for _, id := range killShardIDs {
		tl := byID[id]
		require.NotNil(t, tl, id)
		require.Equal(t, len(tl.counts), tl.allowed, "%s: the limit is never reached before the kill", id)
		res, err := lim.Peek(ctx, id, killPolicy)
		require.NoError(t, err)
		restored := res.Count
		within, lost := 0, 0
		var oldest time.Duration // how long before the kill the oldest lost one was told
		for i, c := range tl.counts {
			ago := killed.Sub(time.Unix(0, tl.at[i]))
			if ago < killBound {
				within++
			}
			if c > restored {
				lost++
				oldest = max(oldest, ago)
			}
		}
		assert.Less(t, oldest, killBound, "%s: a count told %v before the kill is lost (restored %d of %d)", id, oldest, restored, maxOf(tl.counts))
		assert.LessOrEqual(t, lost, within, "%s: %d hits told lost, %d told within %v of the kill", id, lost, within, killBound)

		after := res.Remaining
		if after > 0 {
			r, err := lim.HitN(ctx, id, killPolicy, after)
			require.NoError(t, err)
			require.True(t, r.Allowed, "%s: the %d hits Peek says remain", id, after)
		}
		r, err := lim.Hit(ctx, id, killPolicy)
		require.NoError(t, err)
		require.False(t, r.Allowed, "%s: one more than Peek said", id)
		assert.LessOrEqual(t, int64(tl.allowed)+after, killLimit+int64(within), "%s: allowed %d before, %d after", id, tl.allowed, after)
	}
}

// runKillShardsChild runs TestKill9ShardsChild on dir, kills it killAfter
// after its first output, and returns all it wrote and when it was killed.
func runKillShardsChild(t *testing.T, dir string) ([]byte, time.Time) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9ShardsChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), killShardsEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var (
		data            []byte
		started, killed time.Time
	)
	buf := make([]byte, 1<<16)
	for {
		n, rerr := out.Read(buf)
		data = append(data, buf[:n]...)
		if n > 0 && started.IsZero() {
			started = time.Now() // the child is up and under load
		}
		if !started.IsZero() && killed.IsZero() && time.Since(started) >= killAfter {
			killed = time.Now()
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		}
		if rerr != nil {
			break
		}
	}
	werr := cmd.Wait()
	require.False(t, killed.IsZero(), "the child stopped after %d bytes: %v", len(data), werr)
	return data, killed
}
