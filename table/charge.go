package table

import (
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// Charge counts c.N hits of c's key at now (Unix ns) whatever c's limit
// says, as allowed hits are counted (see [algo.ChargeBucket]): they are
// hits another node allowed on its own copy of the key, which the key's
// owner counts in its state. A FixedWindow hit is counted as
// [Table.FixedWindow] counts it. c must be a valid hit (see [algo.Check]).
func (t *Table) Charge(c *algo.Check, now int64) {
	k := Key{Kind: uint8(c.Algorithm), Scale: int64(c.Period), ID: c.ID}
	var d algo.Decision
	switch c.Algorithm {
	case algo.FixedWindow:
		t.fixedWindow(k, c.Limit, c.N, now, &d)
	case algo.GCRA, algo.TokenBucket, algo.LeakyBucket:
		e, s := t.bucketOf(k)
		algo.ChargeBucket(&s, k.Scale, c.Limit, algo.BucketCapacity(c.Algorithm, c.Burst), c.N, now)
		d.Allowed, d.ResetAfter = true, time.Duration(max(0, s.Death()-now))
		t.putBucket(k, e, &s, &d, true, now)
	case algo.SlidingWindow, algo.SlidingLog:
		var s algo.SlotState
		e, x := t.slotsOf(k, &s)
		var death int64
		if c.Algorithm == algo.SlidingLog {
			algo.ChargeSlidingLog(&s, k.Scale, c.N, now)
			death = algo.SlidingLogDeath(&s, k.Scale)
		} else {
			algo.ChargeSlidingWindow(&s, k.Scale, c.N, now)
			death = algo.SlidingWindowDeath(&s, k.Scale)
		}
		if e != 0 {
			record(t.at(e), true)
		}
		t.putSlots(k, e, x, &s, death)
	default:
		panic(unknown(c.Algorithm))
	}
}
