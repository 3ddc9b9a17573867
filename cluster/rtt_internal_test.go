package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOwnerWaitFollowsRoundTrip: with OwnerWait left zero the wait of a
// check follows the round trips measured to its owner (srtt + 4 rttvar +
// OwnerWaitMargin, or the decaying peak, between the floor and
// RequestTimeout/2); set, it stays.
func TestOwnerWaitFollowsRoundTrip(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name       string
		ownerWait  time.Duration
		timeout    time.Duration
		samples    []time.Duration
		wait, retr time.Duration
	}{
		{name: "no sample: the floor", wait: 100 * ms, retr: 50 * ms},
		{name: "loopback: the floor", samples: []time.Duration{ms / 10, ms / 10}, wait: 100 * ms, retr: 50 * ms},
		// first sample 150: srtt 150, rttvar 75; the second equal: rttvar 56.25.
		{name: "150 ms", samples: []time.Duration{150 * ms, 150 * ms}, wait: 150*ms + 4*56250*time.Microsecond + OwnerWaitMargin, retr: 150*ms + 2*56250*time.Microsecond},
		{name: "steady 150 ms", samples: repeat(150*ms, 60), wait: 175 * ms, retr: 150 * ms},
		{name: "the ceiling", timeout: 400 * ms, samples: repeat(300*ms, 60), wait: 200 * ms, retr: 200 * ms},
		{name: "fixed", ownerWait: 100 * ms, samples: repeat(150*ms, 60), wait: 100 * ms, retr: 50 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Config{Provider: noProvider{}, OwnerWait: tc.ownerWait, RequestTimeout: tc.timeout}.withDefaults()
			require.NoError(t, err)
			m := newMember(cfg, "a:1", nil)
			for _, d := range tc.samples {
				m.fb.rtt.sample("b:1", d)
			}
			wait, retry := m.ownerWait("b:1")
			assert.InDelta(t, float64(tc.wait), float64(wait), float64(ms), "wait")
			assert.InDelta(t, float64(tc.retr), float64(retry), float64(ms), "first retry")
			assert.Equal(t, cfg.OwnerWait, m.OwnerWaitFor("c:1"), "an owner never measured")
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// TestOwnerWaitPeakDecays: one round trip far longer than the others (a
// stall of the machine) holds the wait up, its excess over the smoothed
// round trip halving every peakHalfLife.
func TestOwnerWaitPeakDecays(t *testing.T) {
	ms := time.Millisecond
	cfg, err := Config{Provider: noProvider{}}.withDefaults()
	require.NoError(t, err)
	m := newMember(cfg, "a:1", nil)
	t0 := time.Unix(1_700_000_000, 0)
	for _, d := range append(append(repeat(150*ms, 60), 400*ms), repeat(150*ms, 30)...) {
		m.fb.rtt.sampleAt("b:1", d, t0)
	}
	srtt, _, _, _ := m.fb.rtt.get("b:1", t0)
	require.InDelta(t, float64(150*ms), float64(srtt), float64(ms), "srtt back near 150 ms")
	for _, tc := range []struct {
		after time.Duration
		wait  time.Duration
	}{
		{0, 400*ms + OwnerWaitMargin},
		{peakHalfLife, srtt + (400*ms-srtt)/2 + OwnerWaitMargin},
		{2 * peakHalfLife, srtt + (400*ms-srtt)/4 + OwnerWaitMargin},
	} {
		wait, _ := m.ownerWaitAt("b:1", t0.Add(tc.after))
		assert.InDelta(t, float64(tc.wait), float64(wait), float64(ms), "after %v", tc.after)
	}
}

// TestSyncTimeoutFollowsRoundTrip: a sync's request to a member is bounded
// by Config's (4 × SyncEvery, at least 100 ms) or twice the Owner-mode wait
// the round trips measured to it give, doubled after each request that
// timed out since the last answer (twice at most), at most RequestTimeout.
func TestSyncTimeoutFollowsRoundTrip(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name      string
		syncEvery time.Duration
		samples   []time.Duration
		timeouts  int
		want      time.Duration
	}{
		{name: "never asked: Config's", want: 200 * ms},
		{name: "SyncEvery 20 ms: at least 100 ms", syncEvery: 20 * ms, want: 100 * ms},
		{name: "loopback: Config's", samples: repeat(ms/10, 10), want: 200 * ms},
		{name: "steady 150 ms: twice the wait", samples: repeat(150*ms, 60), want: 2 * (150*ms + OwnerWaitMargin)},
		{name: "SyncEvery 20 ms, 150 ms away", syncEvery: 20 * ms, samples: repeat(150*ms, 60), want: 2 * (150*ms + OwnerWaitMargin)},
		{name: "a timeout, no answer yet", syncEvery: 20 * ms, timeouts: 1, want: 200 * ms},
		{name: "two", syncEvery: 20 * ms, timeouts: 2, want: 400 * ms},
		{name: "five: twice at most", syncEvery: 20 * ms, timeouts: 5, want: 400 * ms},
		{name: "at most RequestTimeout", samples: repeat(150*ms, 60), timeouts: 2, want: time.Second},
		{name: "an answer ends the back-off", samples: repeat(ms/10, 10), timeouts: -1, want: 200 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Config{Provider: noProvider{}, SyncEvery: tc.syncEvery}.withDefaults()
			require.NoError(t, err)
			m := newMember(cfg, "a:1", nil)
			if tc.timeouts < 0 { // timeouts, then the samples
				m.fb.rtt.timedOut("b:1")
				m.fb.rtt.timedOut("b:1")
			}
			for _, d := range tc.samples {
				m.fb.rtt.sample("b:1", d)
			}
			for range max(tc.timeouts, 0) {
				m.fb.rtt.timedOut("b:1")
			}
			assert.InDelta(t, float64(tc.want), float64(m.syncTimeout("b:1")), float64(ms))
			assert.Equal(t, cfg.syncTimeout(), m.syncTimeout("c:1"), "a member never asked")
		})
	}
}
