package fleet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/bench/fleet"
)

// TestFleetProcs runs the simulator against three actorlimitd processes
// in a cluster (built from this tree), in real time: 6 Envoys, two on
// each, a limit of 600 a second reported every second (the default
// interval, TTL 3 s), total demand 1.5 times the limit. It holds the
// issue's targets from the third window on, each with a margin of one
// request per Envoy and window (an Envoy admits whole requests: a window
// may hold one more than its share's worth, one less the next; 6 of 600,
// 1%): at most the limit + 2% admitted in steady demand, + 2% and the
// reserve (5%) while the Envoys join and their shares move (skewed: a
// changed assignment starts a new, full token bucket); at least 95% of it
// when over-demanded, Jain's index of equal demands at least 0.98,
// shares within 5% of max-min fair two intervals after the start; and,
// with the bucket's owner SIGKILLed at 5 s, its Envoys assigned by the
// others within a TTL, the shares fair again within the kill's windows,
// and the fleet over the limit by no more than one TTL's worth of their
// shares over those windows (they are left out of the targets above: the
// others hold their grants until a new owner divides, so they may fall
// short).
func TestFleetProcs(t *testing.T) {
	const envoys, perMinute = 6, 36000
	interval := time.Second
	bin, err := fleet.BuildActorlimitd(t.TempDir())
	require.NoError(t, err)
	patterns := map[string]fleet.Pattern{}
	for _, p := range fleet.Patterns(envoys, perMinute/60.0, 1.5, interval) {
		patterns[p.Name] = p
	}
	for _, tc := range []struct {
		name     string
		pattern  string
		duration time.Duration
		killAt   time.Duration
		over     float64
	}{
		{"steady, the owner killed", "steady", 16 * time.Second, 5 * time.Second, 1.02},
		{"skewed", "skewed", 8 * time.Second, 0, 1.02 + 0.05},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := patterns[tc.pattern]
			start := []time.Duration{0} // shares fair from the start
			res, err := fleet.RunProcs(fleet.Config{Envoys: envoys, LimitPerMinute: perMinute, Interval: interval,
				Duration: tc.duration, Demand: p.Demand, Changes: start, NoAssignment: fleet.Allow, Expired: fleet.Deny},
				fleet.Procs{Binary: bin, KillAt: tc.killAt, Kill: -1})
			require.NoError(t, err)
			for _, w := range res.Windows {
				var each []int
				for _, e := range w.Envoys {
					each = append(each, e.Admitted)
				}
				t.Logf("%v: %d admitted of %.0f, by Envoy %v", w.Start, w.Admitted, w.Limit, each)
			}
			s := fleet.Summarize(res, nil, interval)
			t.Logf("%+v, %d reports, the loop's longest stall %v", s, res.Reports, res.MaxStep)
			whole := float64(envoys) / (perMinute / 60.0 * interval.Seconds())
			assert.LessOrEqual(t, s.MaxOver, tc.over+whole, "admitted against the limit")
			assert.GreaterOrEqual(t, s.MinOverDemanded, 0.95-whole, "admitted when over-demanded")
			assert.GreaterOrEqual(t, s.MinJain, 0.98, "Jain's index of equal demands")
			c := res.Converge[0]
			assert.True(t, c >= 0 && c <= 2*interval, "shares fair %v after the start", c)
			if tc.killAt == 0 {
				return
			}
			k := res.Kill
			require.NotNil(t, k)
			t.Logf("kill: %+v", *k)
			assert.True(t, k.Owner, "the process killed owned the bucket")
			assert.Equal(t, envoys/3, k.Envoys, "Envoys on the process killed")
			assert.True(t, k.Moved >= 0 && k.Moved <= k.TTL, "its Envoys assigned by the others %v after the kill", k.Moved)
			assert.True(t, k.Converge >= 0 && k.Converge <= k.Until-k.At, "shares fair %v after the kill", k.Converge)
			assert.LessOrEqual(t, k.Excess, k.Bound, "admitted over the limit in the kill's windows, against one TTL of its shares")
		})
	}
}
