package quota

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/actorlimit/actorlimit"
)

// TestDivisionRefreshKeepsShare: a refresh sends the share in force, bit
// for bit, when the share computed anew differs from it by rounding (a
// fleet's owner grants a capacity that moves in its last bits) or by a
// drift within the hysteresis, so that the Envoy keeps its token bucket;
// a change beyond the hysteresis is sent, and so is a fall the limit
// needs.
func TestDivisionRefreshKeepsShare(t *testing.T) {
	rule := &Rule{RequestsPerUnit: 600, Unit: time.Second, Algorithm: actorlimit.TokenBucket, ReportingInterval: 500 * time.Millisecond,
		TTL: 1500 * time.Millisecond, BurstIntervals: DefaultBurstIntervals}
	for _, tc := range []struct {
		name     string
		capacity float64 // at the refresh; 200 before
		same     bool    // the refresh sends the first share, bit for bit
	}{
		{"a bit less", math.Nextafter(200, 0), true},
		{"a bit more", math.Nextafter(200, 400), true},
		{"1e-12 more", 200 * (1 + 1e-12), true},
		{"3% more, within the hysteresis", 206, true},
		{"1% less, a fall the limit needs", 198, false},
		{"15% more, beyond the hysteresis", 230, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDivision(DivisionConfig{Limit: 600, TTL: rule.TTL, Reserve: 30, Hysteresis: DefaultHysteresis})
			require.NoError(t, err)
			d.setCapacity(200)
			sends := map[int]map[uint64]float64{}
			for k, at := range []time.Duration{0, rule.TTL / 2} {
				if k == 1 {
					d.setCapacity(tc.capacity)
				}
				sends[k] = map[uint64]float64{}
				now := t0i.Add(at)
				for id := uint64(1); id <= 3; id++ {
					d.Report(id, 100, time.Second, now) // 100 a second each: over-demanded
				}
				d.Assign(now, func(id uint64, share float64) { sends[k][id] = share })
			}
			require.Len(t, sends[1], 3, "each Envoy refreshed")
			for id, first := range sends[0] {
				again := sends[1][id]
				if tc.same {
					assert.Equal(t, first, again, "Envoy %d's share", id)
					assert.True(t, proto.Equal(Strategy(rule, first), Strategy(rule, again)), "Envoy %d's strategy: %v, then %v", id, Strategy(rule, first), Strategy(rule, again))
				} else {
					assert.InDelta(t, tc.capacity/3, again, 1e-9, "Envoy %d's share", id)
				}
			}
		})
	}
}

var t0i = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestDivisionHysteresisOfCapacity: in a fleet, the hysteresis is of an
// equal share of what the division divides (the member's grant), not of
// the fleet's whole limit: 7 Envoys at 333.3/7 each, whose member is then
// granted 350, are sent their rise to 50 (5%, beyond 4% of an equal 50).
func TestDivisionHysteresisOfCapacity(t *testing.T) {
	d, err := NewDivision(DivisionConfig{Limit: 1000, TTL: 3 * time.Second, Reserve: 50, Hysteresis: DefaultHysteresis})
	require.NoError(t, err)
	d.setCapacity(1000.0 / 3)
	for k, capacity := range []float64{1000.0 / 3, 350} {
		d.setCapacity(capacity)
		now := t0i.Add(time.Duration(k) * 250 * time.Millisecond) // no refresh due
		sends := map[uint64]float64{}
		for id := uint64(1); id <= 7; id++ {
			d.Report(id, 75, time.Second, now) // over-demanded
		}
		d.Assign(now, func(id uint64, share float64) { sends[id] = share })
		require.Len(t, sends, 7, "at %v, capacity %v", now, capacity)
		for id, share := range sends {
			assert.InDelta(t, capacity/7, share, 1e-9, "Envoy %d", id)
		}
	}
}
