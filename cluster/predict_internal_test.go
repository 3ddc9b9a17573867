package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestPredictUnseen: a LocalFirst copy counts, beside the owner's count
// and its own hits, the others' hits it cannot have seen yet: their rate
// (the slope between the owner's counts of them) times the time since the
// window started, less what the owner's count of them holds (see
// predict.go).
func TestPredictUnseen(t *testing.T) {
	const (
		period = int64(time.Second)
		w      = int64(1_700_000_000) // the window's number
		start  = w * period
		ms     = int64(time.Millisecond)
	)
	type seen struct{ at, others int64 } // after the window's start
	for _, tc := range []struct {
		name    string
		off     bool
		owned   bool
		others  int64 // owned: the owner's count of the others' hits now
		answers []seen
		carried float64 // the rate carried from the last window, a ns
		now     int64   // after the window's start
		want    int64
	}{
		// Slope 40 / 200 ms; the count of 80 was 100 ms old when taken
		// (80 at 0.2 a ms is 400 ms of hits); unseen (100 + 100) ms.
		{name: "copy", answers: []seen{{300 * ms, 40}, {500 * ms, 80}}, now: 600 * ms, want: 40},
		{name: "copy, alone on the id", answers: []seen{{300 * ms, 0}, {500 * ms, 0}}, now: 600 * ms, want: 0},
		{name: "copy, off with an injected clock", off: true, answers: []seen{{300 * ms, 40}, {500 * ms, 80}}, now: 600 * ms, want: 0},
		{name: "copy, one answer: the carried rate", answers: []seen{{500 * ms, 80}}, carried: 0.2 / float64(ms), now: 600 * ms, want: 40},
		// 0.1 a ms makes 60 by now, fewer than the 80 seen: nothing more.
		{name: "copy, the count ahead of the rate", answers: []seen{{500 * ms, 80}}, carried: 0.1 / float64(ms), now: 600 * ms, want: 0},
		{name: "copy, nothing learnt of the window", carried: 0.2 / float64(ms), now: 300 * ms, want: 60},
		// The others started late in the window: the age of the count is
		// bounded by 2 × (the interval 100 ms + the round trip 150 ms).
		{name: "copy, the age bounded", answers: []seen{{900 * ms, 20}}, carried: 0.2 / float64(ms), now: 950 * ms, want: 110},
		{name: "owner", owned: true, others: 80, carried: 0.2 / float64(ms), now: 500 * ms, want: 20},
		{name: "owner, alone", owned: true, now: 500 * ms, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLocal(0, 1, make([]partState, 1))
			l.lag.on.Store(!tc.off)
			l.lag.gap.Store(100 * ms)
			l.lag.rttHalf.Store(75 * ms)
			k := localKey{id: "a", period: period}
			s := l.shard(k.id)
			e := &localEntry{window: w, epoch: 7, own: 5, rate: tc.carried, others: tc.others}
			s.entries[k] = e
			for _, a := range tc.answers {
				l.observed(pending{key: k, window: w, hits: 5, epoch: 7}, w, 5+a.others, start+a.at)
			}
			s.mu.Lock()
			got := l.unseen(e, tc.owned, start+tc.now, period)
			s.mu.Unlock()
			assert.Equal(t, tc.want, got)
		})
	}
}
