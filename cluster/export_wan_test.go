package cluster

import (
	"context"
	"fmt"
	"net"
	"time"
)

// WithDial returns c whose member makes its connections to the other
// members with dial (wan_test.go puts a proxy between every two members).
func WithDial(c Config, dial func(ctx context.Context, addr string) (net.Conn, error)) Config {
	c.dial = dial
	return c
}

// WithFallbackHook returns c whose member tells hook of each Owner-mode
// fallback (sent, when the check was sent; fallAt, when it was to fall
// back; fellBack, when it did) and, with fellBack zero, of the owner's
// answer that came after it (at late).
func WithFallbackHook(c Config, hook func(owner string, sent, fallAt, fellBack, late time.Time)) Config {
	c.onFallback = hook
	return c
}

// WithoutPrediction returns c whose LocalFirst member does not predict the
// other members' hits (predict.go).
func WithoutPrediction(c Config) Config {
	c.noPredict = true
	return c
}

// PredictState tells what the member predicts of id's window of period
// (predict.go), for the WAN harness's log.
func (m *Member) PredictState(id string, period time.Duration) string {
	k := localKey{id: id, period: int64(period)}
	s := m.local.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[k]
	if e == nil {
		return "no copy"
	}
	now := time.Now().UnixNano()
	unseen := m.local.unseen(e, m.parts[e.part].owned.Load() != nil, now, int64(period))
	return fmt.Sprintf("own %d, others predicted %d (seen %d %v ago, estimate %d, unseen %d), rate %.0f/s, gap %v, rtt/2 %v",
		e.own, e.estimate()-e.own+unseen, e.seen, time.Duration(now-e.seenAt), e.estimate(), unseen,
		e.rate*1e9, time.Duration(m.local.lag.gap.Load()), time.Duration(m.local.lag.rttHalf.Load()))
}
