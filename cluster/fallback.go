package cluster

import (
	"hash/maphash"
	"sync"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/table"
)

// fallbackShards is how many locks the fallback's tables are spread over.
const fallbackShards = 16

// fallback decides, in LocalFirst mode, the checks of the algorithms other
// than FixedWindow while their partition's owner cannot be reached: each
// member alone, on its own table, with its share of the policy (limit and
// burst divided by the live members, at least 1). The hits it decides stay
// here: the owner does not learn them. It is safe for concurrent use.
type fallback struct {
	seed   maphash.Seed
	shards [fallbackShards]struct {
		mu sync.Mutex
		t  *table.Table
	}
}

// newFallback makes a fallback that holds at most maxEntries states (0: no
// bound).
func newFallback(maxEntries int) *fallback {
	f := &fallback{seed: maphash.MakeSeed()}
	per := 0
	if maxEntries > 0 {
		per = (maxEntries + fallbackShards - 1) / fallbackShards
	}
	for i := range f.shards {
		f.shards[i].t = table.New(per)
	}
	return f
}

// decide decides c at now with the member's share of its policy.
func (f *fallback) decide(c algo.Check, now, members int64) algo.Decision {
	c = share(c, members)
	s := &f.shards[maphash.String(f.seed, c.ID)%fallbackShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t.Apply(&c, now)
}

// share returns c with its policy divided among members: the limit, and
// the burst of the bucket algorithms, divided by members and at least 1
// (LeakyBucket's burst, the hits that may wait, at least 0). A share that
// the algorithm would not accept leaves the policy whole.
func share(c algo.Check, members int64) algo.Check {
	if members <= 1 || c.Limit == 0 {
		return c
	}
	s := c
	s.Limit = max(1, c.Limit/members)
	if !c.Algorithm.Windowed() {
		least := int64(1)
		if c.Algorithm == algo.LeakyBucket {
			least = 0
		}
		s.Burst = max(least, c.Burst/members)
	}
	if algo.Validate(s.Algorithm, s.Limit, s.Period, s.Burst) != nil {
		return c
	}
	return s
}

// sweep deletes the states that ended before now and returns how many.
func (f *fallback) sweep(now int64) int {
	n := 0
	for i := range f.shards {
		s := &f.shards[i]
		s.mu.Lock()
		d, _ := s.t.Expire(now, 0)
		s.mu.Unlock()
		n += d
	}
	return n
}

// stats returns how many states the fallback holds and how many its bound
// evicted.
func (f *fallback) stats() (entries int, evictions uint64) {
	for i := range f.shards {
		s := &f.shards[i]
		s.mu.Lock()
		entries += s.t.Len()
		evictions += s.t.Evictions()
		s.mu.Unlock()
	}
	return entries, evictions
}
