package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestPredictUnseen: a LocalFirst copy counts, beside the owner's count
// and its own hits, the others' hits it cannot have seen yet: their rate
// in the window times how long ago the owner's answer could last have
// held them (see predict.go).
func TestPredictUnseen(t *testing.T) {
	const (
		period = int64(time.Second)
		w      = int64(1_700_000_000) // the window's number
		start  = w * period
		ms     = int64(time.Millisecond)
	)
	for _, tc := range []struct {
		name    string
		off     bool
		owned   bool
		others  int64 // the others' hits the owner's answer (or state) holds
		answer  int64 // when the round answered started, after the window's start (-1: none this window)
		carried float64
		now     int64 // after the window's start
		want    int64
	}{
		// rate 100 / (500 - 50) ms; unseen: (600 - 500 + 50) ms of it.
		{name: "copy", others: 100, answer: 500 * ms, now: 600 * ms, want: 33},
		{name: "copy, alone on the id", others: 0, answer: 500 * ms, now: 600 * ms, want: 0},
		{name: "copy, off with an injected clock", off: true, others: 100, answer: 500 * ms, now: 600 * ms, want: 0},
		// Too early in the window for a rate: the last window's, 0.2 a ms,
		// for (80 - 60 + 50) ms.
		{name: "copy, young window", others: 10, answer: 60 * ms, carried: 0.2 / float64(ms), now: 80 * ms, want: 14},
		{name: "copy, nothing learnt of the window", answer: -1, carried: 0.2 / float64(ms), now: 300 * ms, want: 60},
		// Owner: 90 / (600 - 125) ms, for (50 + 75) ms.
		{name: "owner", owned: true, others: 90, now: 600 * ms, want: 23},
		{name: "owner, alone", owned: true, others: 0, now: 600 * ms, want: 0},
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
			if !tc.owned && tc.answer >= 0 {
				l.observed(pending{key: k, window: w, hits: 5, epoch: 7}, w, 5+tc.others, start+tc.answer)
			}
			s.mu.Lock()
			got := l.unseen(e, tc.owned, start+tc.now, period)
			s.mu.Unlock()
			assert.Equal(t, tc.want, got)
		})
	}
}
