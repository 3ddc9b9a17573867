package actorlimit_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit"
)

// BenchmarkPersistence measures one Hit with persistence off and on (the
// default intervals, on this machine's disk), serially and from 256
// callers, with benchKeys keys in the table first. The writer's work, on
// another goroutine, shares the machine with the callers.
func BenchmarkPersistence(b *testing.B) {
	ctx := context.Background()
	p := actorlimit.Policy{Limit: 1 << 40, Period: time.Hour}
	for _, on := range []bool{false, true} {
		for _, callers := range []int{1, 256} {
			name := fmt.Sprintf("persist=%t/keys=%d/callers=%d", on, benchKeys, callers)
			b.Run(name, func(b *testing.B) {
				opts := []actorlimit.Option{actorlimit.WithJanitor(0, 0)}
				if on {
					opts = append(opts, actorlimit.WithPersistence(b.TempDir(), actorlimit.PersistConfig{}))
				}
				lim, err := actorlimit.Start(opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer lim.Close()
				ids := benchIDs(b, benchKeys)
				for _, id := range ids {
					if _, err := lim.Hit(ctx, id, p); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				if callers == 1 {
					for i := 0; b.Loop(); i++ {
						if _, err := lim.Hit(ctx, ids[i%len(ids)], p); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						if _, err := lim.Hit(ctx, ids[i%len(ids)], p); err != nil {
							b.Error(err)
							return
						}
						i += 7
					}
				})
			})
		}
	}
}
