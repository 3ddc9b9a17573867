package cluster

import (
	"math"
	"sync"
	"time"

	"google.golang.org/grpc"
)

// Owner mode across regions. A check waits for its owner at most OwnerWait
// before it falls back to the member's share; a fixed wait shorter than
// the round trip to a far owner would have every check sent there fall
// back. So, unless Config.OwnerWait fixes it, each member measures the
// round trip of its requests to each owner (each attempt's own send to
// its own answer, so a retried request is never taken for a slow one),
// smooths it as TCP does its retransmission timer (RFC 6298: srtt and its
// mean deviation, gains 1/8 and 1/4), and waits for that owner
//
//	max(srtt + 4 × rttvar, peak) + OwnerWaitMargin
//
// at least DefaultOwnerWait (the wait on one network) and at most
// RequestTimeout/2. peak is the longest round trip seen, whose excess over
// srtt halves every peakHalfLife: a loaded machine stalls now and then for
// longer than the deviation says, and a stall seen once is likely again
// soon, while a wait held up that way costs only when an owner does not
// answer at all. The first retry of a request goes at srtt + 2 × rttvar
// (at least half the wait), not before an answer could have come.

// OwnerWaitMargin is what an adaptive OwnerWait adds to the measured round
// trip to an owner and four times its deviation: the owner's own time to
// decide, and a loaded machine's scheduling.
const OwnerWaitMargin = 25 * time.Millisecond

// peakHalfLife is how fast the longest round trip seen to an owner decays
// toward the smoothed one.
const peakHalfLife = 10 * time.Second

// rttTable holds a member's round-trip estimates, by owner address.
type rttTable struct {
	m sync.Map // address -> *rttEst
}

// rttEst is the smoothed round trip to one owner and its mean deviation.
type rttEst struct {
	mu     sync.Mutex
	srtt   time.Duration
	rttvar time.Duration
	peak   time.Duration // the longest round trip, as of peakAt
	peakAt time.Time
	n      int64 // samples taken
	// timeouts is the sync requests to the member that timed out since
	// the last sample: each doubles their bound, up to maxSyncBackoff
	// times (see syncTimeout).
	timeouts int
}

// peakNow returns the peak at now: its excess over srtt halved every
// peakHalfLife since it was set. e.mu is held.
func (e *rttEst) peakNow(now time.Time) time.Duration {
	excess := e.peak - e.srtt
	if excess <= 0 {
		return e.srtt
	}
	halves := float64(now.Sub(e.peakAt)) / float64(peakHalfLife)
	return e.srtt + time.Duration(float64(excess)*math.Exp2(-max(halves, 0)))
}

// sample records a round trip d to the member at addr, ended now.
func (t *rttTable) sample(addr string, d time.Duration) { t.sampleAt(addr, d, time.Now()) }

// sampleAt records a round trip d to the member at addr, ended at now.
func (t *rttTable) sampleAt(addr string, d time.Duration, now time.Time) {
	if addr == "" || d <= 0 {
		return
	}
	v, ok := t.m.Load(addr)
	if !ok {
		v, _ = t.m.LoadOrStore(addr, &rttEst{})
	}
	e := v.(*rttEst)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.peak, e.peakAt = max(e.peakNow(now), d), now
	if e.n == 0 {
		e.srtt, e.rttvar = d, d/2
	} else {
		dev := e.srtt - d
		if dev < 0 {
			dev = -dev
		}
		e.rttvar = (3*e.rttvar + dev) / 4
		e.srtt = (7*e.srtt + d) / 8
	}
	e.n++
	e.timeouts = 0
}

// lateCap is how many times the OwnerWait in force when a check was sent
// its attempt's round trip counts for, at most (see sampleAnswer).
const lateCap = 2

// sampleAnswer records d, the round trip of an Owner-mode check's attempt
// to the owner at addr, sent under an OwnerWait of wait: as measured, or
// lateCap × wait when longer. An answer that long came after the check had
// fallen back: an owner frozen for seconds answers every request of its
// freeze at once when it resumes, and those are stalls, not round trips;
// taken whole they would hold every later check to that owner up to
// RequestTimeout/2 (the peak term). Capped, a far owner is still learnt
// (each answer can double the wait until it covers the round trip), and a
// thawed owner raises the wait to about lateCap times what it was, plus
// the deviation the jump leaves (TestOwnerWaitAfterThaw).
func (t *rttTable) sampleAnswer(addr string, d, wait time.Duration) {
	if wait > 0 {
		d = min(d, lateCap*wait)
	}
	t.sample(addr, d)
}

// timedOut records that a sync request to the member at addr timed out.
func (t *rttTable) timedOut(addr string) {
	if addr == "" {
		return
	}
	v, ok := t.m.Load(addr)
	if !ok {
		v, _ = t.m.LoadOrStore(addr, &rttEst{})
	}
	e := v.(*rttEst)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.timeouts = min(e.timeouts+1, maxSyncBackoff)
}

// maxSyncBackoff is how many times, at most, sync requests that time out
// double the bound of the next ones to the same member.
const maxSyncBackoff = 2

// syncTimeout bounds a sync's request to the member at addr (a batch of
// syncs, charges, backups): Config's (4 × SyncEvery, at least 100 ms), or,
// when longer, twice the wait an Owner-mode check would give that member
// (its round trip, four deviations or the peak, and the margin), doubled
// for each request that timed out since the last answer (up to
// maxSyncBackoff times: RFC 6298's back-off, which finds a round trip
// longer than the bound); at most RequestTimeout. On one network that is
// Config's; across regions a sync whose answer takes a round trip is not
// taken for failed.
func (m *Member) syncTimeout(addr string) time.Duration {
	d := m.cfg.syncTimeout()
	v, ok := m.fb.rtt.m.Load(addr)
	if !ok {
		return d
	}
	e := v.(*rttEst)
	e.mu.Lock()
	if e.n > 0 {
		d = max(d, 2*(max(e.srtt+4*e.rttvar, e.peakNow(time.Now()))+OwnerWaitMargin))
	}
	d <<= e.timeouts
	e.mu.Unlock()
	return min(d, m.cfg.RequestTimeout)
}

// get returns the estimate for addr at now: srtt, rttvar, the peak, and
// whether any sample was taken.
func (t *rttTable) get(addr string, now time.Time) (srtt, rttvar, peak time.Duration, ok bool) {
	v, found := t.m.Load(addr)
	if !found {
		return 0, 0, 0, false
	}
	e := v.(*rttEst)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.srtt, e.rttvar, e.peakNow(now), e.n > 0
}

// ownerWait returns how long a check sent to the owner at addr waits
// before it falls back, and when its first retry goes: Config.OwnerWait
// and half of it when fixed; else from the round trip measured to addr
// (see above), DefaultOwnerWait's floor until there is a measurement.
func (m *Member) ownerWait(addr string) (wait, retry time.Duration) {
	return m.ownerWaitAt(addr, time.Now())
}

// ownerWaitAt is ownerWait at now.
func (m *Member) ownerWaitAt(addr string, now time.Time) (wait, retry time.Duration) {
	floor := m.cfg.OwnerWait
	if !m.cfg.ownerWaitAuto {
		return floor, floor / 2
	}
	srtt, rttvar, peak, ok := m.fb.rtt.get(addr, now)
	if !ok {
		return floor, floor / 2
	}
	ceil := max(floor, m.cfg.RequestTimeout/2)
	wait = min(max(max(srtt+4*rttvar, peak)+OwnerWaitMargin, floor), ceil)
	retry = min(max(srtt+2*rttvar, wait/2), wait)
	return wait, retry
}

// OwnerWaitFor returns the wait of an Owner-mode check sent to the member at
// addr now, after which it falls back to this member's share: see
// Config.OwnerWait.
func (m *Member) OwnerWaitFor(addr string) time.Duration {
	w, _ := m.ownerWait(addr)
	return w
}

// dialOptions returns opts, with the dialer of Config.dial when a test set
// one.
func (c Config) dialOptions(opts ...grpc.DialOption) []grpc.DialOption {
	if c.dial != nil {
		opts = append(opts, grpc.WithContextDialer(c.dial))
	}
	return opts
}
