package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/internal/redistest"
	"github.com/actorlimit/actorlimit/redisstore"
	"github.com/actorlimit/actorlimit/table"
)

// crc16 is Redis Cluster's CRC16 (XMODEM), written from its specification.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slot is Redis Cluster's key slot: the hash tag's CRC16 when the key has a
// non-empty {tag}, the whole key's otherwise.
func slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16(key) % 16384
}

// TestClusterSlots proves the key layout: every key a script call touches
// (one per call) is <prefix>v4:{<ID>}:<algorithm>:<period ns>, with the
// layout's version and the ID as hash tag, so that every algorithm's and
// period's state of one ID lives in one Cluster slot, and keys differ by
// prefix, algorithm, period and ID.
func TestClusterSlots(t *testing.T) {
	require.Equal(t, uint16(0x31C3), crc16("123456789"), "the specification's check value")
	s, err := redisstore.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), redisstore.WithPrefix("app:"))
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, id := range []string{"alice", "bob", "10.0.0.1", "user:42", "ünï"} {
		want := slot("{" + id + "}")
		for _, a := range algo.All() {
			for _, p := range []time.Duration{time.Second, time.Minute} {
				c := algo.Check{Algorithm: a, ID: id, Period: p, Limit: 1, Burst: 1, N: 1}
				k := redisstore.Key(s, &c)
				assert.Equal(t, fmt.Sprintf("app:v4:{%s}:%v:%d", id, a, p.Nanoseconds()), k)
				assert.Equal(t, want, slot(k), k)
				assert.False(t, seen[k], "key %s twice", k)
				seen[k] = true
			}
		}
	}
	assert.Len(t, seen, 5*len(algo.All())*2, fmt.Sprint(seen))
}

// TestClusterSlotsOfIDsWithBraces: an ID with '}' or '%' is escaped in
// its hash tag, so that the tag is the whole ID: IDs that share a prefix
// before a '}' spread over the slots instead of all landing in one, and
// two IDs never share a key. An ID without them keeps its key.
func TestClusterSlotsOfIDsWithBraces(t *testing.T) {
	s, err := redisstore.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	require.NoError(t, err)
	key := func(id string) string {
		c := algo.Check{Algorithm: algo.FixedWindow, ID: id, Period: time.Minute, Limit: 1, N: 1}
		return redisstore.Key(s, &c)
	}
	slots := map[uint16]bool{}
	for i := range 200 {
		slots[slot(key(fmt.Sprintf("4:rule}%d", i)))] = true
	}
	assert.Greater(t, len(slots), 150, "200 ids that differ after a '}' spread over the slots")

	tests := []struct{ id, key string }{
		{"alice", "actorlimit:v4:{alice}:FixedWindow:60000000000"},
		{"a}b", "actorlimit:v4:{a%7Db}:FixedWindow:60000000000"},
		{"a%7Db", "actorlimit:v4:{a%257Db}:FixedWindow:60000000000"},
		{"}", "actorlimit:v4:{%7D}:FixedWindow:60000000000"},
		{"{x}}", "actorlimit:v4:{{x%7D%7D}:FixedWindow:60000000000"},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		k := key(tt.id)
		assert.Equal(t, tt.key, k, "id %q", tt.id)
		assert.Equal(t, slot("{"+tt.key[len("actorlimit:v4:{"):strings.LastIndex(tt.key, "}")]+"}"), slot(k), "id %q: the tag is the whole escaped id", tt.id)
		if other, dup := seen[k]; dup {
			t.Errorf("ids %q and %q share key %s", other, tt.id, k)
		}
		seen[k] = tt.id
	}
}

// scriptKeys is a go-redis hook that records the keys of every script call
// (EVALSHA) the client sends, alone or in a pipeline, and counts the calls
// that declare other than one key.
type scriptKeys struct {
	mu   sync.Mutex
	keys map[string]bool
	bad  []string
}

func (h *scriptKeys) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptKeys) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.see(cmd)
		return next(ctx, cmd)
	}
}

func (h *scriptKeys) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.see(c)
		}
		return next(ctx, cmds)
	}
}

func (h *scriptKeys) see(cmd redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	args := cmd.Args()
	switch cmd.Name() {
	case "incrby", "pexpire", "get", "del", "set": // a key per window's, and Resets
		h.keys[redisstore.ArgString(args[1])] = true
		return
	case "evalsha":
	default:
		return
	}
	if n, ok := args[2].(int); !ok || n != 1 {
		h.bad = append(h.bad, fmt.Sprint(args[:4]...))
		return
	}
	h.keys[redisstore.ArgString(args[3])] = true
}

// TestRealCluster runs the store on a real Redis Cluster (one node that
// holds every slot, through redis.NewClusterClient, where Redis enforces the
// cluster's rules: a script may only touch keys of the slot its declared
// key is in). Over random batches on about 150 ids, crossing the pipeline
// bound and with the script cache flushed half-way, it must decide as the
// embedded table does; every script call declares one key, and every key
// lands in its ID's slot (CLUSTER KEYSLOT), with a TTL. It runs in both
// modes of the fixed window: with a key per window a batch's INCRBYs and
// PEXPIREs name keys of many slots in one pipeline.
func TestRealCluster(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { realCluster(t, m) })
	}
}

func realCluster(t *testing.T, m mode) {
	srv := redistest.StartCluster(t)
	client := srv.ClusterClient()
	sk := &scriptKeys{keys: map[string]bool{}}
	client.AddHook(sk)
	ctx := context.Background()
	st, err := redisstore.New(client, withMode(m, redisstore.WithCallerTime(), redisstore.WithMaxBatch(7), patient,
		redisstore.WithOutage(redisstore.FailError))...)
	require.NoError(t, err)
	tab := table.New(0)
	rng := rand.New(rand.NewPCG(10, 13))
	now := int64(1_790_000_000_123_456_789)
	for step := 0; step < 200; step++ {
		now += rng.Int64N(int64(300 * time.Millisecond))
		if step == 100 {
			require.NoError(t, client.ScriptFlush(ctx).Err())
		}
		checks := make([]algo.Check, 1+rng.IntN(20))
		for i := range checks {
			checks[i] = randomCheck(rng)
			if checks[i].ID != "big" {
				checks[i].ID = fmt.Sprintf("user:%d", rng.IntN(150))
			}
		}
		want := make([]algo.Decision, len(checks))
		got := make([]algo.Decision, len(checks))
		require.NoError(t, tab.Decide(ctx, now, checks, want))
		require.NoError(t, st.Decide(ctx, now, checks, got), "step %d", step)
		for i := range checks {
			require.Equal(t, want[i], got[i], "step %d check %d %+v", step, i, checks[i])
		}
	}
	assert.Positive(t, st.Stats().Reloads, "the flushed scripts were loaded again")
	assert.Empty(t, sk.bad, "script calls that declare other than one key")
	require.Greater(t, len(sk.keys), 150)

	node := srv.Client() // the one node, to ask it about its keys
	slots := map[string]int64{}
	for k := range sk.keys {
		i, j := strings.IndexByte(k, '{'), strings.IndexByte(k, '}')
		if !assert.True(t, i >= 0 && j > i+1, "%s has no hash tag", k) {
			continue
		}
		tag := k[i+1 : j]
		want, err := node.ClusterKeySlot(ctx, "{"+tag+"}").Result()
		require.NoError(t, err)
		got, err := node.ClusterKeySlot(ctx, k).Result()
		require.NoError(t, err)
		assert.Equal(t, want, got, "%s is not in its ID's slot", k)
		slots[tag] = got
	}
	assert.Greater(t, len(slots), 100, "ids over many slots")
	for k, d := range ttls(t, node) {
		assert.Positive(t, d, "%s has no TTL", k)
		assert.True(t, sk.keys[k], "%s was written by a call that did not declare it", k)
	}
}

// TestScriptsTouchTheirKeysOnly reads the scripts' sources: every Redis
// command they call names a key the call declares, or no key at all
// (TIME): KEYS[1] in the script of one key; in those that take a run of
// keys (buckets, fixed windows), key (bound to KEYS[i] and nothing else)
// or the keys of KEYS themselves (MGET). So a script call touches only its
// declared keys, and with Redis Cluster, where the store gives each call
// one key,
// one slot. Redis does not check it for a script without a shebang (it
// allows such a script to reach other keys of its node), so TestRealCluster
// could not see a read of another key.
func TestScriptsTouchTheirKeysOnly(t *testing.T) {
	call := regexp.MustCompile(`redis\.p?call\(\s*'(\w+)'\s*(?:,\s*([^,)]+))?`)
	for name, src := range redisstore.Scripts {
		calls := call.FindAllStringSubmatch(src, -1)
		require.NotEmpty(t, calls, name)
		assert.Equal(t, strings.Count(src, "redis.call(")+strings.Count(src, "redis.pcall("), len(calls),
			"%s: a call whose command is not a literal", name)
		declared := []string{"KEYS[1]"}
		if name != "count" { // the scripts that take a run of keys
			declared = []string{"key", "unpack(KEYS"}
			binds := regexp.MustCompile(`local key\b[^=\n]*=\s*([^\n]+)`).FindAllStringSubmatch(src, -1)
			require.NotEmpty(t, binds, "%s binds key", name)
			for _, b := range binds {
				assert.True(t, strings.HasPrefix(b[1], "KEYS[i]"), "key is bound to KEYS[i] only: %s", b[0])
			}
		}
		for _, c := range calls {
			if strings.EqualFold(c[1], "TIME") {
				continue
			}
			assert.Contains(t, declared, strings.TrimSpace(c[2]), "%s: %s", name, c[0])
		}
	}
}
