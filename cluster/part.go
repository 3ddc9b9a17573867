package cluster

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// partState is what a member knows of one partition. Its fields are read
// by checks and written by the sync and by the partition's grain, without a
// lock.
type partState struct {
	// owned is the owner's state of the partition when this member owns
	// it (its grain runs here), else nil.
	owned atomic.Pointer[ownerPart]
	// known is the incarnation of the owner's state that has every total
	// this member holds for the partition; 0 before the first answer.
	known atomic.Uint64
	// cut says that the last sync with the partition's owner failed: the
	// fallback applies until one succeeds.
	cut atomic.Bool
	// until is the latest end (Unix ns) of a window this member made a copy
	// of in the partition: until then the sync asks the owner, every
	// round, whether it is still the one that has the copies' totals.
	until atomic.Int64
}

// holdUntil records that the member holds a copy of a window that ends at
// end.
func (ps *partState) holdUntil(end int64) {
	for {
		u := ps.until.Load()
		if end <= u || ps.until.CompareAndSwap(u, end) {
			return
		}
	}
}

// ownerPart is the owner's state of one partition's LocalFirst windows:
// for each key, the total each other member counted in its current window,
// and their sum. The partition's grain holds it. The member it runs on
// (self) keeps its own hits in its copies, where its checks count them: the
// owner's count is the sum plus that copy's hits, read when the owner
// answers, so they are in it at once; a copy that member evicts puts its
// hits in the sum. It is safe for concurrent use.
type ownerPart struct {
	inc   uint64 // the incarnation: random, not 0, new each time the partition starts
	limit int    // the most keys it holds; 0: no bound
	self  *local // the copies of the member it runs on; nil for a test's owner

	mu      sync.Mutex
	windows map[localKey]*ownerWindow
}

// ownerWindow is one key's current fixed window as the owner sees it: each
// member's total, and their sum.
type ownerWindow struct {
	window int64
	sum    int64
	nodes  map[string]nodeTotal
}

// nodeTotal is one member's part of a window: the hits of its current copy,
// and base, those of the copies it had before in the window (a copy it
// evicted, or lost when its process restarted).
type nodeTotal struct {
	epoch uint64
	base  int64
	hits  int64
}

func newOwnerPart(limit int) *ownerPart {
	return &ownerPart{inc: rand.Uint64() | 1, limit: limit, windows: make(map[localKey]*ownerWindow)}
}

// add records node's total hits for window of k, counted by its copy
// epoch, and returns the window the owner holds for k and its count. A
// total for an earlier window than the owner's counts nothing.
func (o *ownerPart) add(node string, k localKey, window int64, epoch uint64, hits int64) (int64, int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	w := o.windows[k]
	switch {
	case w == nil:
		if o.limit > 0 && len(o.windows) >= o.limit {
			o.evict(window * k.period)
		}
		w = &ownerWindow{window: window, nodes: make(map[string]nodeTotal, 4)}
		o.windows[k] = w
	case w.window < window:
		*w = ownerWindow{window: window, nodes: make(map[string]nodeTotal, 4)}
	case w.window > window:
		return w.window, w.sum
	}
	t := w.nodes[node]
	switch {
	case epoch > t.epoch: // a new copy: the earlier ones' hits stay counted
		t = nodeTotal{epoch: epoch, base: satAdd(t.base, t.hits), hits: hits}
		w.sum = satAdd(w.sum, hits)
	case epoch == t.epoch && hits > t.hits:
		w.sum = satAdd(w.sum, hits-t.hits)
		t.hits = hits
	default: // sent again, or an older copy's: counted already
		return w.window, w.sum
	}
	w.nodes[node] = t
	return w.window, w.sum
}

// evict deletes one key, chosen among a few: one whose window ended before
// now if there is one, else the one with the fewest hits. o.mu is held.
func (o *ownerPart) evict(now int64) {
	if victim, ok := sampleVictim(o.windows, now, func(w *ownerWindow) (int64, int64) { return w.window, w.sum }); ok {
		delete(o.windows, victim)
	}
}

// count returns the owner's count of k in window, 0 if it holds another.
func (o *ownerPart) count(k localKey, window int64) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if w := o.windows[k]; w != nil && w.window == window {
		return w.sum
	}
	return 0
}

// window returns the window the owner holds for k, or window if it holds
// none or an earlier one, and the owner's sum for it.
func (o *ownerPart) window(k localKey, window int64) (int64, int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if w := o.windows[k]; w != nil && w.window >= window {
		return w.window, w.sum
	}
	return window, 0
}

// sync applies node's totals and answers with the owner's counts.
func (o *ownerPart) sync(node string, totals []*clusterpb.Total) *clusterpb.PartReply {
	reply := &clusterpb.PartReply{Incarnation: o.inc, Counts: make([]*clusterpb.Count, len(totals))}
	for i, t := range totals {
		k := localKey{id: t.GetId(), period: t.GetPeriodNs()}
		if k.period <= 0 {
			reply.Counts[i] = &clusterpb.Count{}
			continue
		}
		var w, c int64
		switch {
		case o.self == nil:
			w, c = o.add(node, k, t.GetWindow(), t.GetEpoch(), t.GetHits())
		case o.self.isSelf(node):
			// The member's own totals: its copies, which the owner reads.
			w, c = o.window(k, t.GetWindow())
			c = o.self.ownerCount(o, k, w, c)
		default:
			w, c = o.add(node, k, t.GetWindow(), t.GetEpoch(), t.GetHits())
			c = o.self.ownerCount(o, k, w, c)
		}
		reply.Counts[i] = &clusterpb.Count{Window: w, Count: c}
	}
	return reply
}

// reset forgets k.
func (o *ownerPart) reset(k localKey) {
	o.mu.Lock()
	delete(o.windows, k)
	o.mu.Unlock()
}

// sweep deletes the windows that ended before now and returns how many.
func (o *ownerPart) sweep(now int64) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for k, w := range o.windows {
		if algo.FloorDiv(now, k.period) > w.window {
			delete(o.windows, k)
			n++
		}
	}
	return n
}
