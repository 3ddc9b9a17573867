package analytics

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/actorlimit/actorlimit/httpadapter"
)

// ErrInvalidConfig is wrapped by every error of [New]; test it with
// errors.Is.
var ErrInvalidConfig = errors.New("analytics: invalid configuration")

// Defaults used when Config leaves a field zero.
const (
	DefaultSlot      = 10 * time.Second
	DefaultHistory   = 360 // an hour of 10 s slots
	DefaultMaxGroups = 4096
	DefaultTopK      = 10
)

// Bounds of Config, so that one rule's memory stays small.
const (
	MinSlot      = time.Millisecond
	MaxHistory   = 100_000
	MaxMaxGroups = 1 << 20
	MaxTopK      = 1000
)

// Clock tells the time; the analytics read it once per observation and
// per snapshot.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Config configures [New]. The zero Config is valid.
type Config struct {
	// Slot is the length of a time slot (default 10 s, at least 1 ms).
	Slot time.Duration
	// History is how many slots are kept, the current one included
	// (default 360; at most 100,000).
	History int
	// MaxGroups bounds the groups a rule tracks in one slot (default 4096,
	// at most 2^20). Requests of groups beyond it are counted as untracked,
	// and still reach the sketch.
	MaxGroups int
	// TopK is how many of the heaviest groups are reported per rule
	// (default 10, at most 1000); the sketch holds 4*TopK counters.
	TopK int
	// Clock tells the time, read at every observation and snapshot. nil,
	// the default, is the wall clock read by a goroutine of the analytics
	// every Slot/100 (at least 1 ms; 100 ms for 10 s slots), since reading
	// it for each request would cost more than the rest of the analytics:
	// an observation may then count in the slot that just ended for up to
	// that long. [Analytics.Close] stops the goroutine.
	Clock Clock
}

// Analytics records, per rule and time slot, how the rule's groups are
// distributed by requests and by remaining limit. Its methods are safe for
// concurrent use. Make it with [New]: a zero Analytics records nothing and
// its snapshots are empty.
type Analytics struct {
	slot      int64 // ns
	history   int
	maxGroups int
	topK      int
	clock     Clock
	rules     sync.Map                       // rule name -> *ruleState
	order     atomic.Pointer[map[string]int] // SetOrder's: rule name -> place

	// With the default clock: the current slot as the goroutine last read
	// it, and its stop.
	ticked    bool
	slotNow   atomic.Int64
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// New returns analytics configured by cfg, or an error naming the field
// that is wrong.
func New(cfg Config) (*Analytics, error) {
	a := &Analytics{slot: int64(cfg.Slot), history: cfg.History, maxGroups: cfg.MaxGroups, topK: cfg.TopK, clock: cfg.Clock}
	if a.slot == 0 {
		a.slot = int64(DefaultSlot)
	}
	if a.history == 0 {
		a.history = DefaultHistory
	}
	if a.maxGroups == 0 {
		a.maxGroups = DefaultMaxGroups
	}
	if a.topK == 0 {
		a.topK = DefaultTopK
	}
	switch {
	case a.slot < int64(MinSlot):
		return nil, fmt.Errorf("%w: Slot %v is under %v", ErrInvalidConfig, cfg.Slot, MinSlot)
	case a.history < 1 || a.history > MaxHistory:
		return nil, fmt.Errorf("%w: History %d is not in 1..%d", ErrInvalidConfig, cfg.History, MaxHistory)
	case a.maxGroups < 1 || a.maxGroups > MaxMaxGroups:
		return nil, fmt.Errorf("%w: MaxGroups %d is not in 1..%d", ErrInvalidConfig, cfg.MaxGroups, MaxMaxGroups)
	case a.topK < 1 || a.topK > MaxTopK:
		return nil, fmt.Errorf("%w: TopK %d is not in 1..%d", ErrInvalidConfig, cfg.TopK, MaxTopK)
	}
	if a.clock == nil {
		a.clock, a.ticked = systemClock{}, true
		a.slotNow.Store(time.Now().UnixNano() / a.slot)
		a.stop, a.done = make(chan struct{}), make(chan struct{})
		go a.tick(max(time.Duration(a.slot)/100, time.Millisecond))
	}
	return a, nil
}

// tick keeps slotNow current until Close.
func (a *Analytics) tick(every time.Duration) {
	defer close(a.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			a.slotNow.Store(now.UnixNano() / a.slot)
		case <-a.stop:
			return
		}
	}
}

// Close stops the goroutine that reads the default clock, and waits for it;
// observations after Close stay in the last slot it read. It does nothing
// with a Config.Clock, and more than once.
func (a *Analytics) Close() error {
	if a.ticked {
		a.closeOnce.Do(func() {
			close(a.stop)
			<-a.done
		})
	}
	return nil
}

// currentSlot returns the number of the current slot.
func (a *Analytics) currentSlot() int64 {
	if a.ticked {
		return a.slotNow.Load()
	}
	return a.clock.Now().UnixNano() / a.slot
}

var _ httpadapter.Observer = (*Analytics)(nil)

// MaxGroupLength bounds the bytes of a group's id that the analytics keep:
// a longer id is kept as its first bytes (at most 96, whole characters),
// "…" and 16 hex digits of its SHA-256, so that its groups stay apart and
// a rule's memory stays within [Analytics.MemoryPerRule] whatever the ids.
const MaxGroupLength = 128

// shortGroup is the part of a long id kept as it is.
const shortGroup = 96

// keptGroup returns the form of id the analytics keep: id itself when it
// is at most MaxGroupLength bytes (the caller copies it before keeping
// it), else a new string of at most MaxGroupLength bytes.
func keptGroup(id string) string {
	if len(id) <= MaxGroupLength {
		return id
	}
	cut := shortGroup
	for cut > 0 && !utf8.RuneStart(id[cut]) {
		cut--
	}
	sum := sha256.Sum256([]byte(id))
	return id[:cut] + "…" + hex.EncodeToString(sum[:8])
}

// Sizes used by MemoryPerRule: a slot's two histograms and its numbers; a
// tracked group (its entry in the slot's slice: the id's string header,
// count and remaining, 32 bytes, twice that while the slice has room to
// grow; and in the index map: the id's header and the index, padded to 24
// bytes, about twice that in a map just grown, with its control bytes); a
// sketch counter with its index entry. Each kept id adds its bytes, at most
// MaxGroupLength (a size class of the allocator: no rounding up).
const (
	slotBytes    = 2*Buckets*4 + 16
	groupBytes   = 2*32 + 2*24 + 16
	counterBytes = 16 + 16 + 16 + 16
	topBytes     = 16 + 8 + 8 // a TopGroup kept with its slot
)

// MemoryPerRule returns the most memory one rule's analytics take, in
// bytes: History slots with their top K each, MaxGroups tracked groups and
// 4*TopK sketch counters, each group id in them counted at MaxGroupLength
// bytes. The analytics keep copies of the ids, never the strings the
// middleware passes (which may hold every key of the request).
func (a *Analytics) MemoryPerRule() int {
	return a.history*(slotBytes+a.topK*(topBytes+MaxGroupLength)) +
		a.maxGroups*(groupBytes+MaxGroupLength) + 4*a.topK*(counterBytes+MaxGroupLength)
}

// group is one group's state in the current slot.
type group struct {
	key       string
	n         int64 // requests in the slot
	remaining int64 // after its last request
}

// slotHists is one finished slot.
type slotHists struct {
	slot      int64 // the slot's number, now/slot; 0 for never written
	groups    uint32
	untracked uint32
	requests  hist
	remaining hist
	top       []TopGroup // the slot's heaviest groups, at most TopK
}

// ruleState is one rule's analytics.
type ruleState struct {
	mu        sync.Mutex
	action    httpadapter.ActionKind
	limit     int64
	first     int64            // the first slot the rule was seen in
	cur       int64            // the current slot
	index     map[string]int32 // group id -> index in groups
	groups    []group          // the current slot's tracked groups
	untracked uint64           // requests of the groups beyond MaxGroups
	sk        *sketch          // of the untracked groups' requests
	ring      []slotHists      // by slot % History
}

// Observe records one rule's decision; it is the [httpadapter.Observer]
// method. Failed decisions, which say nothing of the group, are left out.
func (a *Analytics) Observe(o httpadapter.Observation) {
	if o.Outcome == httpadapter.Failed || a.slot == 0 { // a zero Analytics records nothing
		return
	}
	now := a.currentSlot()
	r := a.rule(o.Rule, now)
	r.mu.Lock()
	r.advance(a, now)
	r.action, r.limit = o.Action, o.Result.Limit
	id := keptGroup(o.Group)
	if i, ok := r.index[id]; ok {
		g := &r.groups[i]
		g.n++
		g.remaining = o.Result.Remaining
	} else if len(r.groups) < a.maxGroups {
		id = strings.Clone(id) // never a slice of the middleware's string
		r.index[id] = int32(len(r.groups))
		r.groups = append(r.groups, group{key: id, n: 1, remaining: o.Result.Remaining})
	} else {
		r.untracked++
		r.sk.add(id)
	}
	r.mu.Unlock()
}

// rule returns the state of the rule named name, made on first sight.
func (a *Analytics) rule(name string, now int64) *ruleState {
	if v, ok := a.rules.Load(name); ok {
		return v.(*ruleState)
	}
	v, _ := a.rules.LoadOrStore(name, &ruleState{
		first: now, cur: now,
		index: make(map[string]int32),
		sk:    newSketch(4 * a.topK),
		ring:  make([]slotHists, a.history),
	})
	return v.(*ruleState)
}

// advance ends the current slot if now is a later one: its groups are
// folded into the ring and forgotten, and its sketch's top K kept. A clock
// that went back stays in the current slot.
func (r *ruleState) advance(a *Analytics, now int64) {
	if now <= r.cur {
		return
	}
	s := &r.ring[mod(r.cur, a.history)]
	top := s.top[:0] // the slot's array, reused
	r.fold(s)
	s.slot = r.cur
	s.top = r.appendTop(top, a.topK)
	clear(r.index)
	clear(r.groups)
	r.groups = r.groups[:0]
	r.untracked = 0
	r.sk.reset()
	r.cur = now
}

// fold writes the current slot's histograms into s; its top is left nil.
func (r *ruleState) fold(s *slotHists) {
	*s = slotHists{slot: r.cur, groups: uint32(len(r.groups)), untracked: uint32(min(r.untracked, uint64(^uint32(0))))}
	for _, g := range r.groups {
		s.requests.add(g.n)
		s.remaining.add(g.remaining)
	}
}

// top returns the k heaviest groups of the current slot: the tracked
// groups' exact counts and the sketch's of the untracked ones, heaviest
// first, ties by id.
func (r *ruleState) top(k int) []TopGroup {
	return slices.Clip(r.appendTop(nil, k))
}

// appendTop appends top(k) to dst[:0]; it allocates only when dst is too
// small for the candidates.
func (r *ruleState) appendTop(dst []TopGroup, k int) []TopGroup {
	all := append(dst[:0], r.sk.top(k)...)
	for _, g := range r.groups {
		all = append(all, TopGroup{Group: g.key, Count: uint64(g.n)})
	}
	slices.SortFunc(all, byCount)
	return all[:min(k, len(all))]
}

// windowTop returns the k heaviest groups over the slots from..r.cur-1
// that the ring holds, and the current slot's top cur: each group's count
// is the sum of its counts in the slots where it was among the top K.
func (r *ruleState) windowTop(a *Analytics, from int64, cur []TopGroup) []TopGroup {
	sum := make(map[string]TopGroup)
	add := func(top []TopGroup) {
		for _, g := range top {
			t := sum[g.Group]
			t.Group, t.Count, t.MaxError = g.Group, t.Count+g.Count, t.MaxError+g.MaxError
			sum[g.Group] = t
		}
	}
	for s := from; s < r.cur; s++ {
		if h := &r.ring[mod(s, a.history)]; h.slot == s {
			add(h.top)
		}
	}
	add(cur)
	out := make([]TopGroup, 0, len(sum))
	for _, g := range sum {
		out = append(out, g)
	}
	slices.SortFunc(out, byCount)
	return slices.Clip(out[:min(a.topK, len(out))])
}

func mod(a int64, n int) int {
	m := a % int64(n)
	if m < 0 {
		m += int64(n)
	}
	return int(m)
}

// Bucket is one histogram bucket's range of values; Max is -1 for the last,
// open one.
type Bucket struct {
	Min int64 `json:"min"`
	Max int64 `json:"max"`
}

// Slot is one time slot of a rule.
type Slot struct {
	// Start is when the slot began.
	Start time.Time `json:"start"`
	// Groups is the number of groups tracked in the slot.
	Groups int `json:"groups"`
	// Untracked counts the requests of groups beyond Config.MaxGroups.
	Untracked int `json:"untracked"`
	// Requests[i] is how many groups made a number of requests in the slot
	// that falls in bucket i.
	Requests []uint32 `json:"requests"`
	// Remaining[i] is how many groups had a remaining limit in bucket i
	// after their last request of the slot.
	Remaining []uint32 `json:"remaining"`
}

// TopGroup is one of the heaviest groups of a slot.
type TopGroup struct {
	// Group is the group's id under the rule.
	Group string `json:"group"`
	// Count is its requests as the sketch counted them: at most MaxError
	// above the truth.
	Count uint64 `json:"count"`
	// MaxError bounds the overcount.
	MaxError uint64 `json:"max_error"`
}

// Rule is one rule's analytics.
type Rule struct {
	// Rule is the rule's name; Action its action kind.
	Rule   string `json:"rule"`
	Action string `json:"action"`
	// Limit is the limit of the rule's last decision.
	Limit int64 `json:"limit"`
	// MemoryBytes is the most memory the rule's analytics take
	// (MemoryPerRule).
	MemoryBytes int `json:"memory_bytes"`
	// Slots are the kept slots, oldest first, the current one last; a slot
	// in which no request matched has zero counts.
	Slots []Slot `json:"slots"`
	// Top are the heaviest groups of the current slot so far, heaviest
	// first.
	Top []TopGroup `json:"top"`
	// PreviousTop are those of the last finished slot, which began at
	// PreviousStart; both are empty (and absent from the JSON) when the
	// rule saw no request in that slot.
	PreviousTop   []TopGroup `json:"previous_top,omitempty"`
	PreviousStart time.Time  `json:"previous_start,omitzero"`
	// WindowTop are the heaviest groups over every kept slot (the last
	// History slots: an hour by default), the current one included, which
	// began at WindowStart: a group's Count is the sum of its counts in the
	// slots where it was among the TopK (so a group never among them in
	// any slot is not there), and MaxError the sum of their overcounts.
	WindowTop   []TopGroup `json:"window_top"`
	WindowStart time.Time  `json:"window_start"`
}

// Snapshot is what the analytics hold at one moment.
type Snapshot struct {
	// Now is when it was taken.
	Now time.Time `json:"now"`
	// SlotSeconds is the length of a slot.
	SlotSeconds float64 `json:"slot_seconds"`
	// Buckets are the ranges of the histograms' buckets.
	Buckets []Bucket `json:"buckets"`
	// Rules are the rules seen so far: those given to
	// [Analytics.SetOrder] in its order (the rules file's), then the
	// others by name.
	Rules []Rule `json:"rules"`
}

// Snapshot returns the analytics of every rule seen so far, up to now.
func (a *Analytics) Snapshot() Snapshot {
	if a.slot == 0 {
		return Snapshot{} // a zero Analytics, not made by New, has nothing
	}
	t := a.clock.Now()
	now := t.UnixNano() / a.slot
	snap := Snapshot{Now: t, SlotSeconds: time.Duration(a.slot).Seconds(), Buckets: make([]Bucket, Buckets)}
	for i := range snap.Buckets {
		lo, hi := BucketRange(i)
		snap.Buckets[i] = Bucket{lo, hi}
	}
	a.rules.Range(func(k, v any) bool {
		snap.Rules = append(snap.Rules, a.ruleSnapshot(k.(string), v.(*ruleState), now))
		return true
	})
	var order map[string]int
	if p := a.order.Load(); p != nil {
		order = *p
	}
	slices.SortFunc(snap.Rules, func(x, y Rule) int {
		i, iok := order[x.Rule]
		j, jok := order[y.Rule]
		switch {
		case iok && jok:
			return cmp.Compare(i, j)
		case iok != jok:
			if iok {
				return -1
			}
			return 1
		}
		return strings.Compare(x.Rule, y.Rule)
	})
	return snap
}

// SetOrder sets the order of the rules in snapshots: names first, in
// their order (give it the rule set's names, as the rules file has them,
// each time the set changes), then the rules not named, by name.
func (a *Analytics) SetOrder(names ...string) {
	order := make(map[string]int, len(names))
	for i, n := range names {
		if _, dup := order[n]; !dup {
			order[n] = i
		}
	}
	a.order.Store(&order)
}

func (a *Analytics) ruleSnapshot(name string, r *ruleState, now int64) Rule {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advance(a, now)
	out := Rule{Rule: name, Action: r.action.String(), Limit: r.limit, MemoryBytes: a.MemoryPerRule(),
		Top: r.top(a.topK)}
	if prev := &r.ring[mod(r.cur-1, a.history)]; prev.slot == r.cur-1 && len(prev.top) > 0 {
		out.PreviousTop = slices.Clone(prev.top)
		out.PreviousStart = time.Unix(0, prev.slot*a.slot).UTC()
	}
	from := max(r.first, r.cur-int64(a.history)+1)
	out.WindowTop = r.windowTop(a, from, out.Top)
	out.WindowStart = time.Unix(0, from*a.slot).UTC()
	for s := from; s <= r.cur; s++ {
		var h slotHists
		switch {
		case s == r.cur:
			r.fold(&h)
		case r.ring[mod(s, a.history)].slot == s:
			h = r.ring[mod(s, a.history)]
		}
		out.Slots = append(out.Slots, Slot{
			Start:     time.Unix(0, s*a.slot).UTC(),
			Groups:    int(h.groups),
			Untracked: int(h.untracked),
			Requests:  slices.Clone(h.requests[:]),
			Remaining: slices.Clone(h.remaining[:]),
		})
	}
	return out
}
