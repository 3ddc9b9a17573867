package algo

import (
	"fmt"
	"time"
)

// Algorithm chooses how a policy counts hits. The zero value is
// [FixedWindow].
type Algorithm uint8

// The algorithms. The root package's documentation says what each
// guarantees and what it keeps per key.
const (
	// FixedWindow counts hits per window of Period, as raterlimiter does;
	// denied hits are counted too.
	FixedWindow Algorithm = iota
	// SlidingWindow is Figma's sliding-window counter, strict variant: a
	// count per Period/60, and never more than Limit hits in any interval
	// of length Period.
	SlidingWindow
	// GCRA is the generic cell rate algorithm: Limit per Period, Burst hits
	// at once, one number per key.
	GCRA
	// TokenBucket holds Burst tokens, refilled with Limit per Period; a hit
	// takes one.
	TokenBucket
	// LeakyBucket is a queue drained at Limit per Period, as nginx's
	// limit_req with burst: Burst hits may wait, and the decision's Delay
	// says how long.
	LeakyBucket
	// SlidingLog logs the time of every allowed hit: exact to the
	// millisecond, and the costly one.
	SlidingLog
)

// spec is one algorithm's entry in the list.
type spec struct {
	name string // Go name, for String
	text string // name in configuration files, for MarshalText
	// windowed algorithms count in windows of whole milliseconds and ignore
	// Burst; the others are buckets drained at Limit per Period.
	windowed bool
	// maxLimit bounds Limit, when positive.
	maxLimit int64
	// extraSlot is 1 when the bucket holds one hit beyond Burst (the one
	// being served, for LeakyBucket).
	extraSlot int64
}

// list is the one list of algorithms, indexed by Algorithm.
var list = [...]spec{
	FixedWindow:   {name: "FixedWindow", text: "fixed_window", windowed: true},
	SlidingWindow: {name: "SlidingWindow", text: "sliding_window", windowed: true},
	GCRA:          {name: "GCRA", text: "gcra"},
	TokenBucket:   {name: "TokenBucket", text: "token_bucket"},
	LeakyBucket:   {name: "LeakyBucket", text: "leaky_bucket", extraSlot: 1},
	SlidingLog:    {name: "SlidingLog", text: "sliding_log", windowed: true, maxLimit: MaxSlidingLogLimit},
}

// All returns every algorithm, in the order of their values.
func All() []Algorithm {
	all := make([]Algorithm, len(list))
	for i := range list {
		all[i] = Algorithm(i)
	}
	return all
}

// Known reports whether a is one of the algorithms.
func (a Algorithm) Known() bool { return int(a) < len(list) }

// Windowed reports whether a counts hits in windows of whole milliseconds
// (FixedWindow, SlidingWindow, SlidingLog) rather than draining a bucket.
func (a Algorithm) Windowed() bool { return a.Known() && list[a].windowed }

// String returns the algorithm's Go name, e.g. "FixedWindow", or
// "Algorithm(n)" for an unknown one.
func (a Algorithm) String() string {
	if !a.Known() {
		return fmt.Sprintf("Algorithm(%d)", int(a))
	}
	return list[a].name
}

// MarshalText returns the algorithm's name in configuration files, e.g.
// "fixed_window". An unknown algorithm is an error.
func (a Algorithm) MarshalText() ([]byte, error) {
	if !a.Known() {
		return nil, fmt.Errorf("%w: unknown algorithm %v", ErrInvalid, a)
	}
	return []byte(list[a].text), nil
}

// UnmarshalText sets a from its name in configuration files, e.g.
// "token_bucket". An unknown name is an error that lists the known ones, and
// leaves a unchanged.
func (a *Algorithm) UnmarshalText(text []byte) error {
	for i := range list {
		if list[i].text == string(text) {
			*a = Algorithm(i)
			return nil
		}
	}
	return fmt.Errorf("%w: unknown algorithm %q (known: %s)", ErrInvalid, text, knownNames())
}

func knownNames() string {
	s := ""
	for i := range list {
		if i > 0 {
			s += ", "
		}
		s += list[i].text
	}
	return s
}

// MaxSlidingLogLimit is the largest Limit a [SlidingLog] policy accepts. A
// full log holds one (gap, count) pair per millisecond with allowed hits,
// so at most Limit pairs of a few bytes: at this bound, some tens of
// kilobytes a key.
const MaxSlidingLogLimit = 10_000

// MaxSpan is the longest Period, and the longest time a full bucket may take
// to drain (capacity*Period/Limit), that the algorithms other than the fixed
// window accept: about a hundred years, so that no time they compute
// overflows before the year 2160.
const MaxSpan = 100 * 365 * 24 * time.Hour
