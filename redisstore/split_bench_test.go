package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/internal/redistest"
	"github.com/actorlimit/actorlimit/redisstore"
)

// BenchmarkSplit is a batch of a per-second and a per-minute check: on one
// store, and on a Split whose sides are two redis-servers (both round trips
// at once).
func BenchmarkSplit(b *testing.B) {
	newStore := func(s *redistest.Server) *redisstore.Store {
		o := clientOpts
		o.Addrs = []string{s.Addr}
		c := redis.NewClient(o.Simple())
		b.Cleanup(func() { c.Close() })
		st, err := redisstore.New(c, redisstore.WithPrefix("bench:"), patient)
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	one, two := redistest.Start(b), redistest.Start(b)
	sec, rest := newStore(one), newStore(two)
	split, err := redisstore.NewSplit(sec, rest)
	if err != nil {
		b.Fatal(err)
	}
	checks := []algo.Check{
		{Algorithm: algo.FixedWindow, ID: "a", Period: time.Second, Limit: 1 << 40, N: 1},
		{Algorithm: algo.FixedWindow, ID: "a", Period: time.Minute, Limit: 1 << 40, N: 1},
	}
	out := make([]algo.Decision, len(checks))
	for _, c := range []struct {
		name  string
		store interface {
			Decide(context.Context, int64, []algo.Check, []algo.Decision) error
		}
	}{{"one store", rest}, {"split", split}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.store.Decide(context.Background(), time.Now().UnixNano(), checks, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
