package actorlimit_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

// The sharded kill test runs as the kill test does (kill_test.go: its
// bound, policy and checks, and internal/testkit's harness), with a limiter
// of killShards shards.
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
// child's callers were told with TestKill9's checkRestored: every decision
// told more than the bound (killBound plus the child's measured stall)
// before the kill is in the restored count, on whichever shard the id is,
// and no more hits are allowed before and after the restart than the limit
// plus those told within the bound.
func TestKill9Shards(t *testing.T) {
	if os.Getenv(killShardsEnv) != "" || os.Getenv(killEnv) != "" {
		return
	}
	dir := t.TempDir()
	k := testkit.RunChild(t, testkit.Child{
		Test: "^TestKill9ShardsChild$",
		Env:  []string{killShardsEnv + "=" + dir},
		Due:  func(started time.Time) bool { return time.Since(started) >= killAfter },
	})
	byID := testkit.ParseTold(t, k.Data)

	lim, err := actorlimit.Start(actorlimit.WithClock(stoppedClock{}), actorlimit.WithJanitor(0, 0), actorlimit.WithShards(killShards),
		actorlimit.WithPersistence(dir, actorlimit.PersistConfig{}))
	require.NoError(t, err)
	defer lim.Close()
	shards := map[string]bool{}
	for _, id := range killShardIDs {
		shards[lim.PIDFor(id).Id] = true
	}
	require.Len(t, shards, killShards, "the ids are not spread over the shards")
	checkRestored(t, lim, byID, killShardIDs, k.Killed)
}
