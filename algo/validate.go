package algo

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"
)

// ErrInvalid is the error that bad input wraps. The root package exports it
// as ErrInvalidArgument.
var ErrInvalid = errors.New("actorlimit: invalid argument")

// maxSpanText is [MaxSpan] in the words of an error message: a person who
// wrote a rules file reads "876000h0m0s" less easily.
const maxSpanText = "about 100 years"

// Validate reports what is wrong with a policy of algorithm a that allows
// limit hits per period, with burst (0 meaning limit) for the bucket
// algorithms: an error wrapping [ErrInvalid] that names the field (as the
// root's Policy calls it) and why, or nil.
func Validate(a Algorithm, limit int64, period time.Duration, burst int64) error {
	switch {
	case !a.Known():
		return fmt.Errorf("%w: unknown Policy.Algorithm %v", ErrInvalid, a)
	case limit < 0:
		return fmt.Errorf("%w: Policy.Limit is %d, negative", ErrInvalid, limit)
	case burst < 0:
		return fmt.Errorf("%w: Policy.Burst is %d, negative", ErrInvalid, burst)
	case period <= 0:
		return fmt.Errorf("%w: Policy.Period is %v, not positive", ErrInvalid, period)
	case a != FixedWindow && period > MaxSpan:
		return fmt.Errorf("%w: Policy.Period %v is longer than %s, too long for %v", ErrInvalid, period, maxSpanText, a)
	}
	s := list[a]
	if s.windowed {
		if period%time.Millisecond != 0 {
			return fmt.Errorf("%w: Policy.Period %v is not a whole number of milliseconds", ErrInvalid, period)
		}
		if s.maxLimit > 0 && limit > s.maxLimit {
			return fmt.Errorf("%w: Policy.Limit %d is more than %d, too large a log for %v", ErrInvalid, limit, s.maxLimit, a)
		}
		return nil
	}
	if limit == 0 {
		return nil
	}
	c := Capacity(a, limit, burst)
	if _, ok := DrainTime(int64(period), limit, c); !ok {
		return fmt.Errorf("%w: a bucket of %d hits (Policy.Burst) takes longer than %s to drain at %d per %v", ErrInvalid, c, maxSpanText, limit, period)
	}
	return nil
}

// Burst returns the burst a check carries for burst as a policy gives it:
// limit when burst is 0.
func Burst(limit, burst int64) int64 {
	if burst == 0 {
		return limit
	}
	return burst
}

// Capacity returns the hits a bucket of algorithm a holds: Burst+1 for
// LeakyBucket (the one served and the Burst waiting), Burst for the others,
// where a burst of 0 means limit.
func Capacity(a Algorithm, limit, burst int64) int64 {
	b := Burst(limit, burst)
	if a.Known() && b < math.MaxInt64 {
		b += list[a].extraSlot
	}
	return b
}

// DrainTime returns how long a bucket that holds capacity hits takes to drain
// at limit hits per period (ns), rounded up, and whether that (before
// rounding) is at most [MaxSpan]. limit and period must be positive, capacity not negative.
func DrainTime(period, limit, capacity int64) (time.Duration, bool) {
	hi, lo := bits.Mul64(uint64(capacity), uint64(period))
	if hi >= uint64(limit) {
		return 0, false
	}
	q, r := bits.Div64(hi, lo, uint64(limit))
	if q > uint64(MaxSpan) {
		return 0, false
	}
	if r > 0 {
		q++ // at most MaxSpan+1 ns
	}
	return time.Duration(q), true
}
