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

// BenchmarkLoneHit is a lone caller's fixed-window hit, a round trip of
// its own on the store's own connection (RESP2, deadlines honoured, as
// actorlimitd sets the client): by the script, and by a key per window
// (WithWindowKeys). The clock is the caller's, as WithWindowKeys needs.
func BenchmarkLoneHit(b *testing.B) {
	srv := redistest.Start(b)
	o := clientOpts
	o.Addrs = []string{srv.Addr}
	o.Protocol = 2
	client := redis.NewClient(o.Simple())
	b.Cleanup(func() { _ = client.Close() })
	for _, m := range modes {
		b.Run("mode="+m.name, func(b *testing.B) {
			st, err := redisstore.New(client, append([]redisstore.Option{redisstore.WithPrefix("bench:"), patient,
				redisstore.WithOutage(redisstore.FailError), redisstore.WithCallerTime()}, m.opts...)...)
			if err != nil {
				b.Fatal(err)
			}
			checks := []algo.Check{{Algorithm: algo.FixedWindow, ID: "lone", Period: time.Second, Limit: 1 << 40, N: 1}}
			out := make([]algo.Decision, 1)
			b.ReportAllocs()
			for b.Loop() {
				if err := st.Decide(context.Background(), time.Now().UnixNano(), checks, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
