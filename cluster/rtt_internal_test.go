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

// TestOwnerWaitAfterThaw: an owner frozen for seconds answers every
// request of its freeze at once when it resumes, all sent under the wait
// in force before it. Those answers, late past lateCap times that wait,
// count as lateCap × that wait: the wait after the thaw stays near what it
// was (without the cap: up to RequestTimeout/2), while an owner truly far
// away is still learnt, the wait growing with its answers until it covers
// the round trip.
func TestOwnerWaitAfterThaw(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		// batches of answers: the requests of a batch were all sent
		// under the wait in force before its first answer came
		batches [][]time.Duration
		most    time.Duration // the wait after, at most
		least   time.Duration // and at least
	}{
		// the floor's wait (100 ms); 40 requests sent during a 3 s
		// freeze answered at its end count 200 ms each: the wait stays
		// under 2 × 200 ms + the margin.
		{name: "a 3 s freeze", batches: [][]time.Duration{repeat(ms, 20), repeat(3*time.Second, 40)},
			most: 2*lateCap*DefaultOwnerWait + OwnerWaitMargin, least: DefaultOwnerWait},
		// a second freeze soon after: each raises the wait about
		// threefold at most (lateCap, and the deviation the jump leaves):
		// an owner that stalls again and again is waited for longer.
		{name: "two freezes", batches: [][]time.Duration{repeat(ms, 20), repeat(3*time.Second, 40), repeat(ms, 5), repeat(3*time.Second, 40)},
			most: 1250 * ms, least: 2 * lateCap * DefaultOwnerWait},
		// an owner 400 ms away, the first checks sent under the floor,
		// one at a time: the wait grows to cover the round trip.
		{name: "an owner 400 ms away", batches: batchesOf(repeat(400*ms, 30)...), most: 500 * ms, least: 400*ms + OwnerWaitMargin},
		// 10 s away (past RequestTimeout/2): the ceiling, as without the
		// cap.
		{name: "an owner 10 s away", batches: batchesOf(repeat(10*time.Second, 30)...), most: 5 * time.Second, least: 5 * time.Second},
		{name: "150 ms: as without the cap", batches: batchesOf(repeat(150*ms, 60)...), most: 176 * ms, least: 174 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Config{Provider: noProvider{}, RequestTimeout: 10 * time.Second}.withDefaults()
			require.NoError(t, err)
			m := newMember(cfg, "a:1", nil)
			for _, batch := range tc.batches {
				wait, _ := m.ownerWait("b:1")
				for _, d := range batch {
					m.fb.rtt.sampleAnswer("b:1", d, wait)
				}
			}
			wait, _ := m.ownerWait("b:1")
			assert.LessOrEqual(t, wait, tc.most)
			assert.GreaterOrEqual(t, wait, tc.least)
		})
	}
}

// batchesOf returns each of ds as a batch of its own: requests sent one at
// a time, each after the answer before.
func batchesOf(ds ...time.Duration) [][]time.Duration {
	out := make([][]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = []time.Duration{d}
	}
	return out
}
