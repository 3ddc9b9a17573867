package fleet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/bench/fleet"
)

// TestFleetTargets runs each demand pattern with 20 Envoys, a limit of
// 60 000 a minute (50 a second per Envoy) reported every second, total demand 1.5 times the
// limit, and holds the targets after the first two windows: at
// most the limit + 2% admitted (+ the reserve, 5%, while demand shifts),
// at least 95% of it, Jain's index of equal demands at least 0.98, and
// shares within 5% of max-min fair within two intervals of a demand shift
// or a join (a leave: within the TTL, three intervals, and one more).
func TestFleetTargets(t *testing.T) {
	const n, perMinute = 20, 60000
	interval := time.Second
	for _, p := range fleet.Patterns(n, perMinute/60.0, 1.5, interval) {
		t.Run(p.Name, func(t *testing.T) {
			res, err := fleet.Run(fleet.Config{Envoys: n, LimitPerMinute: perMinute, Interval: interval,
				Duration: 45 * interval, Demand: p.Demand, Changes: p.Changes, NoAssignment: fleet.Allow, Expired: fleet.Deny})
			require.NoError(t, err)
			s := fleet.Summarize(res, p.Changes, interval)
			t.Logf("%s: %+v, %d reports", p.Name, s, res.Reports)
			over := 1.02
			if len(p.Changes) > 0 {
				over = 1.02 + 0.05
			}
			assert.LessOrEqual(t, s.MaxOver, over, "admitted against the limit")
			assert.GreaterOrEqual(t, s.MinOverDemanded, 0.95, "admitted when over-demanded")
			assert.GreaterOrEqual(t, s.MinJain, 0.98, "Jain's index of equal demands")
			for i, c := range res.Converge {
				limit := 2 * interval
				if p.Name == "join-leave" && i == 1 {
					limit = 4 * interval // a leaver's share comes back after its TTL
				}
				assert.True(t, c >= 0 && c <= limit, "convergence after the change at %v: %v", p.Changes[i], c)
			}
		})
	}
}
