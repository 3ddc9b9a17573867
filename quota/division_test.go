package quota_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/quota"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const interval = time.Second

// fairOracle returns the max-min fair shares of capacity for demands, by
// bisection on the water level (independent of the division's sort), with
// what no one asked for split equally.
func fairOracle(capacity float64, demands []float64) []float64 {
	sum := 0.0
	for _, d := range demands {
		sum += d
	}
	out := make([]float64, len(demands))
	if sum <= capacity {
		for i, d := range demands {
			out[i] = d + (capacity-sum)/float64(len(demands))
		}
		return out
	}
	lo, hi := 0.0, capacity
	for range 200 {
		mid := (lo + hi) / 2
		s := 0.0
		for _, d := range demands {
			s += math.Min(d, mid)
		}
		if s > capacity {
			hi = mid
		} else {
			lo = mid
		}
	}
	for i, d := range demands {
		out[i] = math.Min(d, lo)
	}
	return out
}

func jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	return s * s / (float64(len(xs)) * s2)
}

func newDivision(t *testing.T, limit float64) *quota.Division {
	t.Helper()
	d, err := quota.NewDivision(quota.DivisionConfig{Limit: limit, TTL: 3 * interval, Reserve: limit * 0.05, Hysteresis: 0.02})
	require.NoError(t, err)
	return d
}

// sent returns the shares last sent, by id, and their sum (leavers too).
func sent(d *quota.Division) (map[uint64]float64, float64) {
	m := map[uint64]float64{}
	sum := 0.0
	for _, s := range d.Shares() {
		m[s.ID] = s.Share
		sum += s.Share
	}
	return m, sum
}

// TestDivisionFair: for each set of demands, one report each and one
// Assign give the max-min fair shares, summing to at most the limit.
func TestDivisionFair(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limit   float64
		demands []float64
	}{
		{"equal over", 100, []float64{50, 50, 50, 50}},
		{"equal under", 100, []float64{10, 10, 10, 10}},
		{"skewed 80%", 100, []float64{400, 25, 25, 25, 25}},
		{"small ones served", 100, []float64{5, 10, 200, 300}},
		{"one alone", 100, []float64{1000}},
		{"idle ones", 100, []float64{0, 0, 90}},
		{"many", 1000, func() []float64 {
			var ds []float64
			for i := range 50 {
				ds = append(ds, float64(i*3))
			}
			return ds
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDivision(t, tc.limit)
			for i, dem := range tc.demands {
				d.Report(uint64(i), uint64(dem*10), 10*time.Second, t0)
			}
			calls := 0
			d.Assign(t0, func(uint64, float64) { calls++ })
			assert.Equal(t, len(tc.demands), calls, "every Envoy's first assignment is sent")
			got, sum := sent(d)
			assert.LessOrEqual(t, sum, tc.limit*(1+1e-9), "shares sum to at most the limit")
			want := fairOracle(tc.limit, tc.demands)
			for i := range tc.demands {
				assert.InDelta(t, want[i], got[uint64(i)], tc.limit*1e-6, "Envoy %d (demand %v)", i, tc.demands[i])
			}
			// Max-min: an Envoy short of its demand has no less than anyone.
			for i, di := range tc.demands {
				if got[uint64(i)] < di-1e-9 {
					for j := range tc.demands {
						assert.GreaterOrEqual(t, got[uint64(i)], got[uint64(j)]-1e-9, "Envoy %d short of demand has less than %d", i, j)
					}
				}
			}
		})
	}
}

// TestDivisionJain: equal demand gives shares whose Jain's index is at
// least 0.98, whatever the number of Envoys.
func TestDivisionJain(t *testing.T) {
	for _, n := range []int{2, 3, 7, 20, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			d := newDivision(t, 1000)
			for i := range n {
				d.Report(uint64(i), 5000, time.Second, t0)
			}
			d.Assign(t0, func(uint64, float64) {})
			got, _ := sent(d)
			var xs []float64
			for _, v := range got {
				xs = append(xs, v)
			}
			assert.GreaterOrEqual(t, jain(xs), 0.98)
		})
	}
}

// TestDivisionReserve: an Envoy with no report yet gets at most the reserve
// (and what no one asked for), and the others shrink at once to make room.
func TestDivisionReserve(t *testing.T) {
	d := newDivision(t, 100)
	d.Report(1, 1000, time.Second, t0)
	d.Report(2, 1000, time.Second, t0)
	d.Assign(t0, func(uint64, float64) {})
	got, _ := sent(d)
	require.InDelta(t, 50, got[1], 1e-9)
	d.Join(3)
	sentTo := map[uint64]float64{}
	d.Assign(t0.Add(100*time.Millisecond), func(id uint64, s float64) { sentTo[id] = s })
	assert.InDelta(t, 5, sentTo[3], 1e-9, "the newcomer gets the reserve")
	assert.InDelta(t, 47.5, sentTo[1], 1e-9, "a fall is sent at once")
	assert.InDelta(t, 47.5, sentTo[2], 1e-9)
	_, sum := sent(d)
	assert.LessOrEqual(t, sum, 100+1e-9)
}

// step is one event of a division's timeline.
type step struct {
	at      time.Duration
	join    []uint64
	leave   []uint64
	demands map[uint64]float64 // reported: demand over the last interval
	// want: the shares sent, by id, after the step's Assign (NaN: absent).
	want map[uint64]float64
}

func runSteps(t *testing.T, d *quota.Division, steps []step) {
	t.Helper()
	for i, s := range steps {
		now := t0.Add(s.at)
		for _, id := range s.join {
			d.Join(id)
		}
		for _, id := range s.leave {
			d.Leave(id)
		}
		for id, dem := range s.demands {
			d.Report(id, uint64(dem*interval.Seconds()), interval, now)
		}
		d.Assign(now, func(uint64, float64) {})
		got, sum := sent(d)
		require.LessOrEqual(t, sum, d.Config().Limit*(1+1e-9), "step %d at %v: sum of shares", i, s.at)
		for id, w := range s.want {
			v, ok := got[id]
			if math.IsNaN(w) {
				assert.False(t, ok, "step %d at %v: Envoy %d should be forgotten", i, s.at, id)
				continue
			}
			require.True(t, ok, "step %d at %v: Envoy %d absent", i, s.at, id)
			assert.InDelta(t, w, v, 1e-6, "step %d at %v: Envoy %d", i, s.at, id)
		}
	}
}

// TestDivisionLeaverHeldUntilTTL: an Envoy that leaves keeps its share
// counted against the limit until its assignment's TTL has passed, then
// the others get it.
func TestDivisionLeaverHeldUntilTTL(t *testing.T) {
	d := newDivision(t, 90)
	runSteps(t, d, []step{
		{at: 0, demands: map[uint64]float64{1: 100, 2: 100, 3: 100}, want: map[uint64]float64{1: 30, 2: 30, 3: 30}},
		{at: 1 * interval, leave: []uint64{3}, demands: map[uint64]float64{1: 100, 2: 100}, want: map[uint64]float64{1: 30, 2: 30, 3: 30}},
		{at: 2 * interval, demands: map[uint64]float64{1: 100, 2: 100}, want: map[uint64]float64{1: 30, 2: 30, 3: 30}},
		// Sent at 0 with TTL 3 s (and refreshed at 1.5 s? no: it left at 1 s, its last send was at 0).
		{at: 3*interval - time.Millisecond, demands: map[uint64]float64{1: 100, 2: 100}, want: map[uint64]float64{1: 30, 2: 30, 3: 30}},
		{at: 3 * interval, demands: map[uint64]float64{1: 100, 2: 100}, want: map[uint64]float64{1: 45, 2: 45, 3: math.NaN()}},
	})
}

// TestDivisionShiftConverges: Envoys report every interval at staggered
// moments; after the hot Envoy changes, every share is within 5% of the
// max-min fair share within two intervals.
func TestDivisionShiftConverges(t *testing.T) {
	const n, limit = 10, 1000.0
	d := newDivision(t, limit)
	demand := func(hot int) []float64 {
		ds := make([]float64, n)
		for i := range ds {
			ds[i] = 30 // 9 × 30 + hot 800
		}
		ds[hot] = 800
		return ds
	}
	hot := 0
	shift := 10 * interval
	var lastReport [n]time.Duration // each Envoy's window start
	tick := interval / 20
	for now := time.Duration(0); now <= shift+2*interval; now += tick {
		if now == shift {
			hot = 7
		}
		for i := range n {
			phase := time.Duration(i) * interval / n
			if now < phase || (now-phase)%interval != 0 {
				continue
			}
			// What Envoy i saw over [lastReport, now]: the old demand before
			// the shift, the new one after.
			count := 0.0
			for t := lastReport[i]; t < now; t += tick {
				h := 0
				if t >= shift {
					h = 7
				}
				count += demand(h)[i] * tick.Seconds()
			}
			d.Report(uint64(i), uint64(math.Round(count)), now-lastReport[i], t0.Add(now))
			lastReport[i] = now
		}
		d.Assign(t0.Add(now), func(uint64, float64) {})
		_, sum := sent(d)
		require.LessOrEqual(t, sum, limit*(1+1e-9), "at %v", now)
	}
	got, _ := sent(d)
	want := fairOracle(limit, demand(hot))
	for i := range n {
		assert.InDelta(t, want[i], got[uint64(i)], 0.05*want[i], "Envoy %d two intervals after the shift", i)
	}
}

// TestDivisionRefresh: a steady demand sends nothing new between
// refreshes, and a refresh comes once half the TTL has passed.
func TestDivisionRefresh(t *testing.T) {
	d := newDivision(t, 100)
	var sends []time.Duration
	for at := time.Duration(0); at <= 3*interval; at += interval / 2 {
		d.Report(1, 60, interval, t0.Add(at))
		d.Report(2, 61, interval, t0.Add(at)) // wobbles within 2%
		d.Assign(t0.Add(at), func(id uint64, _ float64) {
			if id == 1 {
				sends = append(sends, at)
			}
		})
	}
	assert.Equal(t, []time.Duration{0, 1500 * time.Millisecond, 3 * time.Second}, sends)
}

// TestDivisionConfigErrors: every bad field is named.
func TestDivisionConfigErrors(t *testing.T) {
	ok := quota.DivisionConfig{Limit: 1, TTL: time.Second}
	for _, tc := range []struct {
		name string
		mod  func(*quota.DivisionConfig)
		want string
	}{
		{"limit", func(c *quota.DivisionConfig) { c.Limit = 0 }, "limit"},
		{"limit NaN", func(c *quota.DivisionConfig) { c.Limit = math.NaN() }, "limit"},
		{"ttl", func(c *quota.DivisionConfig) { c.TTL = 0 }, "TTL"},
		{"reserve", func(c *quota.DivisionConfig) { c.Reserve = -1 }, "reserve"},
		{"hysteresis", func(c *quota.DivisionConfig) { c.Hysteresis = 1 }, "hysteresis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			_, err := quota.NewDivision(c)
			require.ErrorIs(t, err, quota.ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestDivisionWobbleNoChurn: demands that wobble by less than the
// hysteresis, under and over the limit, send nothing between refreshes.
func TestDivisionWobbleNoChurn(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b [2]float64 // Envoy 1's and 2's demand, alternating
	}{
		{"under the limit", [2]float64{30, 30.3}, [2]float64{40.4, 40}},
		{"over the limit", [2]float64{300, 303}, [2]float64{404, 400}},
		{"one small", [2]float64{20, 20.2}, [2]float64{404, 400}},
		{"small share moves by less than 2% of an equal share", [2]float64{15.5, 16}, [2]float64{404, 400}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDivision(t, 100)
			n := 0
			for k := range 3 {
				at := time.Duration(k) * interval / 2
				d.Report(1, uint64(tc.a[k%2]*1000), 1000*interval, t0.Add(at))
				d.Report(2, uint64(tc.b[k%2]*1000), 1000*interval, t0.Add(at))
				d.Assign(t0.Add(at), func(uint64, float64) { n++ })
				_, sum := sent(d)
				require.LessOrEqual(t, sum, 100+1e-9)
			}
			assert.Equal(t, 2, n, "only the first assignments")
		})
	}
}

// TestDivisionSmallFallsWhenNeeded: falls within the hysteresis are sent
// when the shares in force would otherwise pass the limit (a newcomer's
// small reserve taken from full shares).
func TestDivisionSmallFallsWhenNeeded(t *testing.T) {
	d, err := quota.NewDivision(quota.DivisionConfig{Limit: 100, TTL: 3 * interval, Reserve: 1, Hysteresis: 0.02})
	require.NoError(t, err)
	d.Report(1, 1000, interval, t0)
	d.Report(2, 1000, interval, t0)
	d.Assign(t0, func(uint64, float64) {})
	d.Join(3)
	sentTo := map[uint64]float64{}
	d.Assign(t0.Add(time.Millisecond), func(id uint64, s float64) { sentTo[id] = s })
	assert.Equal(t, map[uint64]float64{1: 49.5, 2: 49.5, 3: 1}, sentTo)
}

// TestDivisionMargin: the margin raises a demand before the water-filling:
// a small Envoy gets its demand and the margin, the rest goes to the big.
func TestDivisionMargin(t *testing.T) {
	d, err := quota.NewDivision(quota.DivisionConfig{Limit: 100, TTL: 3 * interval, Margin: 0.1})
	require.NoError(t, err)
	d.Report(1, 10, interval, t0)
	d.Report(2, 1000, interval, t0)
	got := map[uint64]float64{}
	d.Assign(t0, func(id uint64, s float64) { got[id] = s })
	assert.InDelta(t, 11, got[1], 1e-9)
	assert.InDelta(t, 89, got[2], 1e-9)
}
