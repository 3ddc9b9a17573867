package analytics_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/analytics"
	"github.com/actorlimit/actorlimit/httpadapter"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

func obs(rule, grp string, limit, remaining int64) httpadapter.Observation {
	return httpadapter.Observation{Rule: rule, Group: grp, Outcome: httpadapter.Within,
		Result: actorlimit.Result{Allowed: remaining > 0, Limit: limit, Remaining: remaining}}
}

// buckets returns a histogram with n[i] at bucket i.
func buckets(pairs ...int) []uint32 {
	h := make([]uint32, analytics.Buckets)
	for i := 0; i < len(pairs); i += 2 {
		h[pairs[i]] = uint32(pairs[i+1])
	}
	return h
}

func TestBucketRange(t *testing.T) {
	for _, tc := range []struct {
		i      int
		lo, hi int64
	}{{0, 0, 0}, {1, 1, 1}, {2, 2, 3}, {3, 4, 7}, {7, 64, 127}, {analytics.Buckets - 1, 1 << (analytics.Buckets - 2), -1}} {
		lo, hi := analytics.BucketRange(tc.i)
		assert.Equal(t, [2]int64{tc.lo, tc.hi}, [2]int64{lo, hi}, "bucket %d", tc.i)
	}
}

func TestSlotsAndDistributions(t *testing.T) {
	clk := testkit.NewClock(t0)
	a, err := analytics.New(analytics.Config{Clock: clk, History: 3})
	require.NoError(t, err)

	// Slot 0: a made 1 request (remaining 9), b 3 (remaining 7 after the
	// last), bot 40 (remaining 0).
	a.Observe(obs("r", "a", 10, 9))
	for i := range 3 {
		a.Observe(obs("r", "b", 10, int64(9-i)))
	}
	for range 40 {
		a.Observe(obs("r", "bot", 10, 0))
	}
	a.Observe(httpadapter.Observation{Rule: "r", Group: "a", Outcome: httpadapter.Failed})
	s := a.Snapshot()
	require.Len(t, s.Rules, 1)
	r := s.Rules[0]
	require.Len(t, r.Slots, 1, "only the current slot so far")
	assert.Equal(t, analytics.Slot{Start: t0, Groups: 3,
		Requests:  buckets(1, 1, 2, 1, 6, 1),              // 1 -> b1, 3 -> b2, 40 -> b6 (32..63)
		Remaining: buckets(0, 1, 3, 1, 4, 1)}, r.Slots[0]) // 0 -> b0, 7 -> b3, 9 -> b4 (8..15)
	assert.Equal(t, []analytics.TopGroup{{Group: "bot", Count: 40}, {Group: "b", Count: 3}, {Group: "a", Count: 1}}, r.Top)
	assert.Equal(t, int64(10), r.Limit)
	assert.Equal(t, "block", r.Action)

	// Slot 1: only the bot. Slot 2 is empty. Slot 3: a.
	clk.Advance(10 * time.Second)
	for range 20 {
		a.Observe(obs("r", "bot", 10, 0))
	}
	clk.Advance(20 * time.Second)
	a.Observe(obs("r", "a", 10, 9))
	r = a.Snapshot().Rules[0]
	require.Len(t, r.Slots, 3, "History bounds the slots kept")
	assert.Equal(t, []time.Time{t0.Add(10 * time.Second), t0.Add(20 * time.Second), t0.Add(30 * time.Second)},
		[]time.Time{r.Slots[0].Start, r.Slots[1].Start, r.Slots[2].Start})
	assert.Equal(t, buckets(5, 1), r.Slots[0].Requests, "20 requests -> bucket 5 (16..31)")
	assert.Equal(t, buckets(0, 1), r.Slots[0].Remaining)
	assert.Equal(t, buckets(), r.Slots[1].Requests, "an empty slot")
	assert.Equal(t, buckets(1, 1), r.Slots[2].Requests)
	assert.Empty(t, r.PreviousTop, "the previous slot, slot 2, had no request")
	assert.True(t, r.PreviousStart.IsZero())
	assert.Equal(t, []analytics.TopGroup{{Group: "bot", Count: 20}, {Group: "a", Count: 1}}, r.WindowTop,
		"the kept slots: 1 to 3")
	assert.Equal(t, t0.Add(10*time.Second), r.WindowStart)

	// Time passing with no traffic moves the window on.
	clk.Advance(time.Hour)
	r = a.Snapshot().Rules[0]
	require.Len(t, r.Slots, 3)
	for _, sl := range r.Slots {
		assert.Equal(t, buckets(), sl.Requests)
	}
	assert.Empty(t, r.Top)
}

func TestMaxGroups(t *testing.T) {
	clk := testkit.NewClock(t0)
	a, err := analytics.New(analytics.Config{Clock: clk, MaxGroups: 2, TopK: 1})
	require.NoError(t, err)
	for _, g := range []string{"a", "b", "c", "a", "d", "d", "d", "d"} {
		a.Observe(obs("r", g, 100, 50))
	}
	r := a.Snapshot().Rules[0]
	assert.Equal(t, 2, r.Slots[0].Groups)
	assert.Equal(t, 5, r.Slots[0].Untracked, "c once and d four times")
	assert.Equal(t, "d", r.Top[0].Group, "the sketch still finds an untracked heavy group")
}

func TestClockBackStaysInSlot(t *testing.T) {
	clk := testkit.NewClock(t0.Add(15 * time.Second))
	a, err := analytics.New(analytics.Config{Clock: clk})
	require.NoError(t, err)
	a.Observe(obs("r", "a", 10, 9))
	clk.Advance(-time.Minute)
	a.Observe(obs("r", "a", 10, 8))
	r := a.Snapshot().Rules[0]
	require.Len(t, r.Slots, 1)
	assert.Equal(t, buckets(2, 1), r.Slots[0].Requests)
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  analytics.Config
		want string
	}{
		{analytics.Config{Slot: time.Microsecond}, "Slot 1µs is under 1ms"},
		{analytics.Config{Slot: -time.Second}, "Slot -1s"},
		{analytics.Config{History: -1}, "History -1 is not in 1..100000"},
		{analytics.Config{MaxGroups: 1 << 21}, "MaxGroups 2097152"},
		{analytics.Config{TopK: -3}, "TopK -3"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, err := analytics.New(tc.cfg)
			require.ErrorIs(t, err, analytics.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestMemoryPerRule(t *testing.T) {
	a, err := analytics.New(analytics.Config{Clock: testkit.NewClock(t0)})
	require.NoError(t, err)
	// 360 slots of 208 bytes and 10 top entries of 32 each, 4096 groups
	// of 128, 40 counters of 64; every entry's id at most 128 bytes.
	assert.Equal(t, 360*(208+10*(32+128))+4096*(128+128)+40*(64+128), a.MemoryPerRule())
}

func TestConcurrentObserveAndSnapshot(t *testing.T) {
	clk := testkit.NewClock(t0)
	a, err := analytics.New(analytics.Config{Clock: clk, History: 4, MaxGroups: 50})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				a.Observe(obs(fmt.Sprintf("r%d", w%2), fmt.Sprintf("g%d", i%70), 100, int64(i%100)))
				if i%500 == 0 {
					clk.Advance(10 * time.Second)
				}
			}
		}()
	}
	for range 20 {
		_ = a.Snapshot()
	}
	wg.Wait()
	s := a.Snapshot()
	require.Len(t, s.Rules, 2)
	for _, r := range s.Rules {
		assert.LessOrEqual(t, len(r.Slots), 4)
		for _, sl := range r.Slots {
			assert.LessOrEqual(t, sl.Groups, 50)
		}
	}
}

// TestWallClock runs the analytics on the default clock, read by their own
// goroutine: observations land in the current slot, and Close stops the
// goroutine (twice is fine).
func TestWallClock(t *testing.T) {
	a, err := analytics.New(analytics.Config{Slot: time.Hour})
	require.NoError(t, err)
	a.Observe(obs("r", "a", 10, 9))
	a.Observe(obs("r", "a", 10, 8))
	r := a.Snapshot().Rules[0]
	require.NotEmpty(t, r.Slots)
	last := r.Slots[len(r.Slots)-1]
	assert.Equal(t, buckets(2, 1), last.Requests)
	assert.WithinDuration(t, time.Now().Truncate(time.Hour), last.Start, time.Hour)
	require.NoError(t, a.Close())
	require.NoError(t, a.Close())
}

// TestTopKeptForTheWindow: the heaviest groups of every kept slot (an hour
// of 10 s slots by default) stay in WindowTop, summed over the slots, long
// after their slot ended; PreviousTop is the slot just before the current
// one. A step is a slot: who made how many requests, then the checks.
func TestTopKeptForTheWindow(t *testing.T) {
	clk := testkit.NewClock(t0)
	a, err := analytics.New(analytics.Config{Clock: clk, TopK: 2})
	require.NoError(t, err)
	type step struct {
		name     string
		advance  time.Duration // before the slot's requests
		requests map[string]int
		window   []analytics.TopGroup
		previous []analytics.TopGroup
	}
	for i, st := range []step{
		{"a bot's burst", 0, map[string]int{"bot": 50, "c1": 2, "c2": 1},
			[]analytics.TopGroup{{Group: "bot", Count: 50}, {Group: "c1", Count: 2}}, nil},
		{"the next slot", 10 * time.Second, map[string]int{"c1": 3},
			[]analytics.TopGroup{{Group: "bot", Count: 50}, {Group: "c1", Count: 5}},
			[]analytics.TopGroup{{Group: "bot", Count: 50}, {Group: "c1", Count: 2}}},
		{"20 minutes later", 20 * time.Minute, map[string]int{"c3": 1},
			[]analytics.TopGroup{{Group: "bot", Count: 50}, {Group: "c1", Count: 5}}, nil},
		{"the bot again", 30 * time.Minute, map[string]int{"bot": 10},
			[]analytics.TopGroup{{Group: "bot", Count: 60}, {Group: "c1", Count: 5}}, nil},
		{"an hour after the burst", 10*time.Minute - 10*time.Second, map[string]int{"c3": 1},
			[]analytics.TopGroup{{Group: "bot", Count: 10}, {Group: "c1", Count: 3}}, nil}, // the burst's slot is gone, the next one kept
	} {
		clk.Advance(st.advance)
		for g, n := range st.requests {
			for range n {
				a.Observe(obs("r", g, 100, 50))
			}
		}
		r := a.Snapshot().Rules[0]
		assert.Equal(t, st.window, r.WindowTop, "step %d, %s: window", i, st.name)
		assert.Equal(t, st.previous, r.PreviousTop, "step %d, %s: previous", i, st.name)
		assert.Equal(t, r.Slots[0].Start, r.WindowStart, "step %d", i)
	}
}

// TestSnapshotJSONHasNoZeroTime: with no previous slot, the JSON has no
// previous_start (it had "0001-01-01T00:00:00Z").
func TestSnapshotJSONHasNoZeroTime(t *testing.T) {
	clk := testkit.NewClock(t0)
	a, err := analytics.New(analytics.Config{Clock: clk})
	require.NoError(t, err)
	a.Observe(obs("r", "a", 10, 9))
	b, err := json.Marshal(a.Snapshot())
	require.NoError(t, err)
	assert.NotContains(t, string(b), "0001-01-01")
	assert.NotContains(t, string(b), "previous_start")
	clk.Advance(10 * time.Second)
	a.Observe(obs("r", "a", 10, 8))
	b, err = json.Marshal(a.Snapshot())
	require.NoError(t, err)
	assert.Contains(t, string(b), `"previous_start":"2026-11-23T10:00:00Z"`)
}

// TestSetOrder: the snapshot lists the rules SetOrder names in its order
// (the rules file's), then the others by name.
func TestSetOrder(t *testing.T) {
	a, err := analytics.New(analytics.Config{Clock: testkit.NewClock(t0)})
	require.NoError(t, err)
	for _, r := range []string{"zeta", "alpha", "mid", "extra-b", "extra-a"} {
		a.Observe(obs(r, "g", 10, 9))
	}
	names := func() []string {
		var out []string
		for _, r := range a.Snapshot().Rules {
			out = append(out, r.Rule)
		}
		return out
	}
	assert.Equal(t, []string{"alpha", "extra-a", "extra-b", "mid", "zeta"}, names(), "by name without an order")
	a.SetOrder("zeta", "mid", "alpha", "unseen")
	assert.Equal(t, []string{"zeta", "mid", "alpha", "extra-a", "extra-b"}, names())
}
