package redisstore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/redisstore"
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
// (one per call) is <prefix>v2:{<ID>}:<algorithm>:<period ns>, with the
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
				assert.Equal(t, fmt.Sprintf("app:v2:{%s}:%v:%d", id, a, p.Nanoseconds()), k)
				assert.Equal(t, want, slot(k), k)
				assert.False(t, seen[k], "key %s twice", k)
				seen[k] = true
			}
		}
	}
	assert.Len(t, seen, 5*len(algo.All())*2, fmt.Sprint(seen))
}
