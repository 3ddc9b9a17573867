package algo

import (
	"math"
	"time"
)

// FixedState is one key's state under [FixedWindow]: the row of the Erlang
// raterlimiter, <bucketNum> -> <count, created, modified>. The zero
// FixedState holds no hits.
type FixedState struct {
	// Window is the number of the window the hits were counted in:
	// floor(Unix ns / Period), which for a whole-millisecond Period is the
	// original's floor(Unix ms / scale ms). The window ends at
	// (Window+1)*Period Unix ns.
	Window int64
	// Count is the number of hits counted in Window, denied ones too. It
	// saturates at the largest int64.
	Count int64
	// Created is when the state entered Window, in Unix milliseconds.
	Created int64
	// Modified is the time of the last hit, in Unix milliseconds.
	Modified int64
}

// Death returns when s is back to full capacity: the end of its window, in
// Unix ns, for windows of period ns. It saturates at the largest int64.
func (s *FixedState) Death(period int64) int64 {
	if s.Window == math.MaxInt64 {
		return math.MaxInt64
	}
	return mulSat(s.Window+1, period)
}

// FixedWindowHit counts n hits in s at now (Unix ns) and decides them as
// the raterlimiter does: the window is floor(now / period), every hit is
// counted, denied ones too, and the hits are allowed iff the window's count
// after them is at most limit. A state of an earlier window starts again
// from zero in the window of now; a now in a window before s's own (a clock
// that stepped back) counts into s's own, newer window, so that a step back
// never forgets hits. The count saturates at the largest int64: hits beyond
// it are denied, whatever the limit. period and n must be positive.
func FixedWindowHit(s *FixedState, period, limit, n, now int64) Decision {
	w := FloorDiv(now, period)
	ms := FloorDiv(now, int64(time.Millisecond))
	if w > s.Window || s.Count == 0 && *s == (FixedState{}) {
		s.Window, s.Count, s.Created = w, 0, ms
	}
	var saturated bool
	s.Count, saturated = AddSat(s.Count, n)
	s.Modified = ms
	d := Decision{Count: s.Count, Allowed: !saturated && s.Count <= limit}
	d.Remaining = max(0, limit-s.Count)
	d.ResetAfter = time.Duration((s.Window+1)*period - now)
	switch {
	case d.Allowed:
	case n > limit:
		d.RetryAfter = Never
	default:
		d.RetryAfter = d.ResetAfter
	}
	return d
}

// FixedWindowPeek reports s at now (Unix ns) as [FixedWindowHit] would see
// it, and whether one more hit would be allowed. A state with nothing
// counted in the window of now has ResetAfter 0: it is at full capacity.
func FixedWindowPeek(s FixedState, period, limit, now int64) Decision {
	var d Decision
	if s != (FixedState{}) && s.Window >= FloorDiv(now, period) {
		d.Count = s.Count
		d.ResetAfter = time.Duration((s.Window+1)*period - now)
	}
	d.Allowed = d.Count < limit
	d.Remaining = max(0, limit-d.Count)
	switch {
	case d.Allowed:
	case limit < 1:
		d.RetryAfter = Never
	default:
		d.RetryAfter = d.ResetAfter
	}
	return d
}
