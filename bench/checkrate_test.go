package bench

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit"
)

// frozen is a clock that stays inside one window for the whole run, so the
// benchmarks measure counting, not window changes.
type frozen struct{}

var frozenAt = time.Unix(1_700_000_000, 0)

func (frozen) Now() time.Time { return frozenAt }

func frozenNanos() int64 { return frozenAt.UnixNano() }

// neverReached is a limit no benchmark reaches.
const neverReached = 1 << 62

// scaleMs is the window of every benchmark: one hour.
const scaleMs = 3_600_000

func keySet(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
	}
	return keys
}

type checkFunc func(id string) (bool, error)

type impl struct {
	name string
	make func(b *testing.B) checkFunc
}

var impls = []impl{
	{"actor", func(b *testing.B) checkFunc {
		lim, err := actorlimit.Start(actorlimit.WithClock(frozen{}), actorlimit.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = lim.Close() })
		return func(id string) (bool, error) {
			r, err := lim.CheckRate(id, scaleMs, neverReached)
			return r.Allowed, err
		}
	}},
	{"mutex-btree", func(*testing.B) checkFunc {
		l := newMutexBTree(frozenNanos)
		return func(id string) (bool, error) { return l.CheckRate(id, scaleMs, neverReached), nil }
	}},
	{"mutex-map", func(*testing.B) checkFunc {
		l := newMutexMap(frozenNanos)
		return func(id string) (bool, error) { return l.CheckRate(id, scaleMs, neverReached), nil }
	}},
}

// BenchmarkCheckRate measures one CheckRate through each implementation,
// with every key already counted once (steady state), by one caller and by
// 256 concurrent callers.
func BenchmarkCheckRate(b *testing.B) {
	for _, im := range impls {
		for _, keys := range []int{1, 10_000, 100_000} {
			for _, callers := range []int{1, 256} {
				name := fmt.Sprintf("impl=%s/keys=%d/callers=%d", im.name, keys, callers)
				b.Run(name, func(b *testing.B) { benchCheckRate(b, im, keySet(keys), callers) })
			}
		}
	}
}

func benchCheckRate(b *testing.B, im impl, keys []string, callers int) {
	if len(keys) == 0 {
		b.Fatal("empty key set")
	}
	check := im.make(b)
	for _, k := range keys {
		if _, err := check(k); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	if callers == 1 {
		for i := 0; i < b.N; i++ {
			if ok, err := check(keys[i%len(keys)]); !ok || err != nil {
				b.Fatal("denied or failed:", err)
			}
		}
		return
	}
	b.SetParallelism(callers / max(1, runtimeProcs()))
	var next atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(7919)) // spread the callers over the key set
		for pb.Next() {
			if ok, err := check(keys[i%len(keys)]); !ok || err != nil {
				b.Error("denied or failed:", err)
				return
			}
			i++
		}
	})
}
