package persist_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit/actor"
	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/persist"
	"github.com/actorlimit/actorlimit/table"
)

// fillTable returns a table of n fixed-window entries alive at t0.
func fillTable(b *testing.B, n int) *table.Table {
	b.Helper()
	tb := table.New(0)
	for i := range n {
		c := algo.Check{Algorithm: algo.FixedWindow, Period: time.Hour, Limit: 100, ID: fmt.Sprintf("user-%07d", i), N: 1 + int64(i%5)}
		tb.Apply(&c, t0)
	}
	if tb.Len() != n {
		b.Fatalf("%d entries, want %d", tb.Len(), n)
	}
	return tb
}

// benchEntries is the entries of BenchmarkLoad and BenchmarkSnapshot: a
// million, or a tenth of it with -short, which CI's run of every benchmark
// once passes so that none takes long to set up.
func benchEntries() int {
	if testing.Short() {
		return 100_000
	}
	return 1_000_000
}

// BenchmarkLoad measures what a restart costs: reading and checking a
// snapshot of a million entries from this machine's disk and loading it
// into an empty table. With -short (CI's run of every benchmark once), a
// tenth of the entries.
func BenchmarkLoad(b *testing.B) {
	n := benchEntries()
	dir := b.TempDir()
	j, err := persist.New(dir, persist.Config{})
	if err != nil {
		b.Fatal(err)
	}
	src := fillTable(b, n)
	j.Start(func(yield func(algo.Record) bool) { src.Snapshot(t0, yield) }, func() {}, func() {})
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			j, err := persist.New(dir, persist.Config{})
			if err != nil {
				b.Fatal(err)
			}
			tb := table.New(0)
			ld, err := j.Load(t0, func(r algo.Record) error { return tb.Load(t0, r) })
			if err != nil || ld.Records != n || tb.Len() != n {
				b.Fatalf("loaded %d records, %d entries: %v", ld.Records, tb.Len(), err)
			}
		}
	})
}

// BenchmarkSnapshot measures the encoding of a snapshot of a million
// entries by the limiter actor (the writing is the writer's): whole, the
// limiter's work in all, which it spreads over messages of
// actor.SnapshotChunk keys; and one such chunk, the longest a check waits
// for a snapshot.
//
// With -short, a tenth of the entries.
func BenchmarkSnapshot(b *testing.B) {
	n := benchEntries()
	src := fillTable(b, n)
	j, err := persist.New(b.TempDir(), persist.Config{FS: newMemFS()})
	if err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("entries=%d/chunk=all", n), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			j.Snapshot(func(yield func(algo.Record) bool) { src.Snapshot(t0, yield) })
		}
	})
	b.Run(fmt.Sprintf("entries=%d/chunk=%d", n, actor.SnapshotChunk), func(b *testing.B) {
		record := func(r algo.Record) bool { j.SnapshotRecord(r); return true }
		var cur algo.Cursor
		j.BeginSnapshot()
		b.ReportAllocs()
		for b.Loop() {
			if !src.SnapshotChunk(t0, &cur, actor.SnapshotChunk, record) {
				b.StopTimer()
				cur = algo.Cursor{}
				j.BeginSnapshot() // a new one, not a buffer that grows without end
				b.StartTimer()
			}
		}
	})
}
