package cluster_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/internal/logtest"
)

// placementIDs is the ids whose partitions the placement tests compare.
func placementIDs() []string {
	ids := make([]string, 2000)
	for i := range ids {
		ids[i] = fmt.Sprintf("user:%d", i)
	}
	return ids
}

// placement returns the partition of each id on a detached member with
// cfg.
func placement(t *testing.T, cfg cluster.Config) []int {
	t.Helper()
	cfg.Clock = newFakeClock()
	m, err := cluster.Detached(cfg, "node", nil)
	require.NoError(t, err)
	defer m.Kill()
	ids := placementIDs()
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = m.PartitionOf(id)
	}
	return out
}

// TestPartitionDependsOnKey: the partition of an id depends on the key
// (without the key nobody can compute which ids share a partition): two
// keys, or two cluster names on loopback with no key, place almost every
// id differently; one key places every id the same on every member.
func TestPartitionDependsOnKey(t *testing.T) {
	keyA := []byte("0123456789abcdef-cluster-a")
	keyB := []byte("0123456789abcdef-cluster-b")
	a := placement(t, cluster.Config{PartitionKey: keyA})
	assert.Equal(t, a, placement(t, cluster.Config{PartitionKey: keyA}), "the same key: the same partitions")
	differ := func(x, y []int) int {
		n := 0
		for i := range x {
			if x[i] != y[i] {
				n++
			}
		}
		return n
	}
	ids := len(placementIDs())
	// With 1024 partitions, two unrelated hashes agree on about 1 id in 1024.
	assert.Greater(t, differ(a, placement(t, cluster.Config{PartitionKey: keyB})), ids*95/100, "another key")
	assert.Greater(t, differ(placement(t, cluster.Config{Name: "one"}), placement(t, cluster.Config{Name: "two"})), ids*95/100,
		"no key, another cluster name")
	assert.Greater(t, differ(a, placement(t, cluster.Config{})), ids*95/100, "a key, and none")
}

// TestPartitionSameInEveryProcess: a member in another process places
// every id in the same partition as this one (the hash's key does not
// depend on the process, as maphash's seeds do).
func TestPartitionSameInEveryProcess(t *testing.T) {
	cfg := cluster.Config{PartitionKey: []byte("a key the members share, 32 B..")}
	if os.Getenv("ACTORLIMIT_PLACEMENT_CHILD") == "1" {
		for _, p := range placement(t, cfg) {
			fmt.Println(p)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPartitionSameInEveryProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "ACTORLIMIT_PLACEMENT_CHILD=1")
	out, err := cmd.Output()
	require.NoError(t, err)
	var theirs []int
	for line := range strings.Lines(string(out)) {
		var p int
		if _, err := fmt.Sscanf(line, "%d\n", &p); err == nil {
			theirs = append(theirs, p)
		}
	}
	assert.Equal(t, placement(t, cfg), theirs)
}

// TestPartitionKeyConfig: a key shorter than MinPartitionKeyLen is
// refused, and so is no key on a host that is not loopback; no key on
// loopback, or a key anywhere, is taken.
func TestPartitionKeyConfig(t *testing.T) {
	key := bytes.Repeat([]byte{7}, cluster.MinPartitionKeyLen)
	tests := []struct {
		name string
		cfg  cluster.Config
		err  string
	}{
		{"no key, default host", cluster.Config{}, ""},
		{"no key, 127.0.0.2", cluster.Config{Host: "127.0.0.2"}, ""},
		{"no key, ::1", cluster.Config{Host: "::1"}, ""},
		{"no key, localhost", cluster.Config{Host: "localhost"}, ""},
		{"no key, routable host", cluster.Config{Host: "10.1.2.3"}, `PartitionKey is empty and Host "10.1.2.3" is not loopback`},
		{"no key, every interface", cluster.Config{Host: "0.0.0.0"}, `PartitionKey is empty and Host "0.0.0.0" is not loopback`},
		{"key, routable host", cluster.Config{Host: "10.1.2.3", PartitionKey: key, TrustedNetwork: true}, ""},
		{"short key", cluster.Config{PartitionKey: key[1:]}, "PartitionKey is 15 bytes, shorter than 16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Clock = newFakeClock()
			m, err := cluster.Detached(tt.cfg, "node", nil)
			if tt.err == "" {
				require.NoError(t, err)
				m.Kill()
				return
			}
			require.ErrorIs(t, err, actorlimit.ErrInvalidArgument)
			assert.ErrorContains(t, err, tt.err)
		})
	}
}

// TestPartitionKeyMismatchRefused: a member whose key differs has its
// syncs refused by the owner, which counts them and logs one ERROR
// however many it refuses; its hits never reach the owner's count.
func TestPartitionKeyMismatchRefused(t *testing.T) {
	clock := newFakeClock()
	logs := &logtest.Recorder{}
	byAddr := make(map[string]*cluster.Member)
	ownerOf := func(int) string { return "owner" }
	sendTo := func(addr string, msg any) (any, error) { return wire(t, byAddr[addr].HandleSync(wire(t, msg))), nil }
	noGrain := func(int, any) (any, error) { return nil, fmt.Errorf("no grain") }
	start := func(node string, key string, logger *slog.Logger) *cluster.Member {
		cfg := cluster.Config{Clock: clock, Partitions: 16, PartitionKey: []byte(key), Logger: logger}
		m, err := cluster.DetachedBatched(cfg, node, noGrain, ownerOf, sendTo)
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close() })
		byAddr[node] = m
		return m
	}
	owner := start("owner", "the cluster's key, 32 bytes long", slog.New(logs))
	for p := range 16 {
		owner.Own(p)
	}
	same := start("same", "the cluster's key, 32 bytes long", nil)
	other := start("other", "another key, also 32 bytes long.", nil)
	require.NotEqual(t, owner.KeyPrint(), other.KeyPrint())

	p := actorlimit.Policy{Limit: 10, Period: time.Minute}
	for range 3 {
		_, err := other.Limiter.HitN(t.Context(), "k", p, 1)
		require.NoError(t, err)
		other.SyncNow()
	}
	_, err := same.Limiter.HitN(t.Context(), "k", p, 1)
	require.NoError(t, err)
	same.SyncNow()
	assert.EqualValues(t, 3, owner.SyncStats().KeyMismatches, "every sync of the member with another key")
	assert.Positive(t, other.SyncStats().Failures, "its syncs fail")
	assert.Zero(t, same.SyncStats().Failures, "the member with the same key syncs")
	res, err := owner.Limiter.Peek(t.Context(), "k", p)
	require.NoError(t, err)
	assert.EqualValues(t, 1, res.Count, "only the member with the same key counted at the owner")
	var errors []string
	for _, r := range logs.Records() {
		if strings.HasPrefix(r, "ERROR ") {
			errors = append(errors, r)
		}
	}
	require.Len(t, errors, 1, "one line for every refusal")
	assert.Contains(t, errors[0], "PartitionKey differs")
}
