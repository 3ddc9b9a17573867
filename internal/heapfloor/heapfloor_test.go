package heapfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		floor, live, scanned uint64
		base, want           int
	}{
		{64 * mib, 4 * mib, 4 * mib, 100, 1500},     // 4 + 4 x 15 = 64 MiB
		{64 * mib, 4 * mib, 6 * mib, 100, 1000},     // stacks and globals count: 4 + 6 x 10
		{64 * mib, 32 * mib, 32 * mib, 100, 100},    // 32 + 32 = 64: the base reaches it
		{64 * mib, 48 * mib, 48 * mib, 100, 100},    // never below the base
		{64 * mib, 64 * mib, 64 * mib, 100, 100},    // at the floor
		{64 * mib, 500 * mib, 500 * mib, 50, 50},    // past it: the base
		{64 * mib, 3 * mib, 3 * mib, 100, 1600},     // 61/3 x 100 = 2034 would put the minimum at 81 MiB: 3 + 3 x 16 < 64 = 4 x 16
		{64 * mib, 0, 0, 100, 1600},                 // nothing scanned yet: the runtime's minimum at the floor
		{64 * mib, 100 << 10, 300 << 10, 100, 1600}, // a small heap: the minimum is the goal
		{3 * mib, 1 * mib, 1 * mib, 100, 100},       // a floor below the runtime's minimum: the base
		{64 * mib, 4 * mib, 4 * mib, 3000, 3000},    // a base above what the floor asks
	} {
		if got := percentFor(c.floor, c.live, c.scanned, c.base); got != c.want {
			t.Errorf("percentFor(%d, %d, %d, %d) = %d; want %d", c.floor, c.live, c.scanned, c.base, got, c.want)
		}
	}
}

var sink []byte

// churn allocates n bytes of garbage in 4 KiB pieces and returns how many
// collections ran meanwhile.
func churn(n int) uint32 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.NumGC
	for i := 0; i < n/4096; i++ {
		sink = make([]byte, 4096)
	}
	runtime.ReadMemStats(&ms)
	return ms.NumGC - before
}

// TestFewerCollections: 256 MiB of garbage on a small live heap takes many
// collections at GOGC=100 and a handful with a 64 MiB floor, after which
// Stop gives GOGC back.
func TestFewerCollections(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	without := churn(256 << 20)

	f, err := Start(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC() // the floor is set after a collection
	runtime.GC()
	with := churn(256 << 20)
	if f.Percent() <= 100 {
		t.Errorf("GOGC %d on a small live heap; want it raised", f.Percent())
	}

	// A live heap past the floor: after a collection GOGC is the base again.
	live := make([]byte, 80<<20)
	for i := 0; f.Percent() != 100; i++ {
		if i == 1000 {
			t.Fatalf("GOGC %d with 80 MiB live over a 64 MiB floor; want 100", f.Percent())
		}
		runtime.GC()      // marks the 80 MiB
		runtime.Gosched() // the finalizer goroutine adjusts
	}
	runtime.KeepAlive(live)
	f.Stop()
	f.Stop()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("GOGC %d after Stop; want 100 back", p)
	}
	t.Logf("collections for 256 MiB of garbage: %d at GOGC=100, %d with a 64 MiB floor", without, with)
	// 256 MiB of garbage over a goal of about 64 MiB: about 4.
	if with < 2 || with > 8 || without < 2*with {
		t.Errorf("%d collections with the floor against %d without; want 2 to 8, and half as many", with, without)
	}
}

func TestStartRefuses(t *testing.T) {
	if _, err := Start(0); err == nil {
		t.Error("Start(0): no error")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	if _, err := Start(64 << 20); err == nil {
		t.Error("Start with GOGC=off: no error")
	}
}
