package quota_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestDivisionRefreshAtOwnReport: with steady demands, an Envoy's
// unchanged assignment is sent again at its own report once half the TTL
// (1.5 s) has passed, not at another Envoy's report; one that stops
// reporting gets it from another's report once 5/6 of the TTL (2.5 s) has
// passed, before it expires at 3 s. Envoy 1 reports every second, Envoy 2
// every 250 ms in between; Envoy 2's joining at 0.25 s changes Envoy 1's
// share.
func TestDivisionRefreshAtOwnReport(t *testing.T) {
	const q = 250 * time.Millisecond
	for _, tc := range []struct {
		name  string
		quiet time.Duration // Envoy 1 reports no more from then on
		want  []time.Duration
	}{
		{name: "reporting", quiet: time.Hour, want: []time.Duration{0, q, 2 * time.Second, 4 * time.Second}},
		{name: "silent from 1.5 s", quiet: 1500 * time.Millisecond, want: []time.Duration{0, q, 2*time.Second + 3*q, 5*time.Second + q}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDivision(t, 100)
			var sends []time.Duration
			for at := time.Duration(0); at <= 5500*time.Millisecond; at += q {
				switch {
				case at%time.Second == 0 && at < tc.quiet:
					d.Report(1, 60, interval, t0.Add(at))
				case at%time.Second != 0:
					d.Report(2, 61, interval, t0.Add(at))
				default:
					continue
				}
				d.Assign(t0.Add(at), func(id uint64, _ float64) {
					if id == 1 {
						sends = append(sends, at)
					}
				})
			}
			assert.Equal(t, tc.want, sends)
		})
	}
}
