package actorlimit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/persist"
	"github.com/actorlimit/actorlimit/table"
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

// BenchmarkStartPersisted measures a restart: Start on a directory of a
// million keys, a sixth under each algorithm, with a log of 100 000
// changes behind the snapshot, until the limiter serves. That is reading
// and checking both files, loading them into the table, and writing the
// loaded state as the snapshot Start writes before it serves. Each run
// starts on a fresh copy of the directory (not timed), and its Close (a
// last snapshot) is not timed. With -short (CI's run of every benchmark
// once), a tenth of the keys and of the log.
func BenchmarkStartPersisted(b *testing.B) {
	n, logged := 1_000_000, 100_000
	if testing.Short() {
		n, logged = 100_000, 10_000
	}
	tmpl := b.TempDir()
	writePersisted(b, tmpl, n, logged)
	b.Run(fmt.Sprintf("entries=%d/logged=%d", n, logged), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			dir := copyDir(b, tmpl)
			b.StartTimer()
			lim, err := actorlimit.Start(actorlimit.WithClock(stoppedClock{}), actorlimit.WithJanitor(0, 0),
				actorlimit.WithPersistence(dir, actorlimit.PersistConfig{}))
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			st, err := lim.Stats(context.Background())
			if err != nil || st.Entries != n {
				b.Fatalf("%d entries, want %d: %v", st.Entries, n, err)
			}
			if err := lim.Close(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}

// writePersisted leaves in dir what a limiter with n keys, a sixth under
// each algorithm, leaves after a snapshot and logged more changes.
func writePersisted(b *testing.B, dir string, n, logged int) {
	b.Helper()
	now := stoppedClock{}.Now().UnixNano()
	check := func(i int) algo.Check {
		a := algo.All()[i%len(algo.All())]
		return algo.Check{Algorithm: a, Period: time.Hour, Limit: 100, Burst: 100, ID: fmt.Sprintf("user-%07d", i), N: 1}
	}
	tb := table.New(0)
	for i := range n {
		c := check(i)
		tb.Apply(&c, now)
	}
	if tb.Len() != n {
		b.Fatalf("%d entries, want %d", tb.Len(), n)
	}
	j, err := persist.New(dir, persist.Config{})
	if err != nil {
		b.Fatal(err)
	}
	j.Start(func(yield func(algo.Record) bool) { tb.Snapshot(now, yield) }, func() {}, func() {})
	for i := range logged {
		c := check(i * (n / logged))
		tb.Apply(&c, now)
		j.Append(tb.Record(&c))
		if i%1000 == 999 {
			j.Commit()
		}
	}
	j.Commit()
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
}

// copyDir returns a new directory holding a copy of dir's files.
func copyDir(b *testing.B, dir string) string {
	b.Helper()
	cp := b.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err == nil {
			err = os.WriteFile(filepath.Join(cp, e.Name()), data, 0o600)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return cp
}
