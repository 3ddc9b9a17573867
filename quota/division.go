package quota

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// ErrInvalid is wrapped by every error about bad input to this package: a
// division's configuration, a rule, a bucket id.
var ErrInvalid = errors.New("quota: invalid")

// DivisionConfig says how one bucket's limit is divided.
type DivisionConfig struct {
	// Limit is the fleet-wide limit in requests per second; more than 0.
	Limit float64
	// TTL is an assignment's time to live: an Envoy that stops reporting
	// keeps its share this long after it was last assigned, and the share
	// goes back to the others only then. More than 0.
	TTL time.Duration
	// Reserve is the demand, in requests per second, assumed of an Envoy
	// whose demand is not known yet (it has not reported a time_elapsed):
	// what it gets, at most, until its first report. At least 0.
	Reserve float64
	// Margin is the room given above a reported demand, relative: 0.1
	// gives an Envoy that asks 10 a second up to 11 (if the level allows),
	// so that a demand measured a little low, or growing, is not denied
	// while the limit has room. In [0, 1].
	Margin float64
	// Hysteresis is the relative change of a share below which the change
	// is not sent unless the limit needs it: 0.02 sends a change of more
	// than 2% of the share, or of an equal share if that is larger (so
	// that a small share does not follow every unit its demand's count
	// moves). It keeps steady demand from churning assignments. In [0, 1).
	Hysteresis float64
}

func (c DivisionConfig) validate() error {
	switch {
	case !(c.Limit > 0) || math.IsInf(c.Limit, 0):
		return fmt.Errorf("%w: division limit %v: want a finite rate above 0", ErrInvalid, c.Limit)
	case c.TTL <= 0:
		return fmt.Errorf("%w: division TTL %v: want more than 0", ErrInvalid, c.TTL)
	case !(c.Reserve >= 0) || math.IsInf(c.Reserve, 0):
		return fmt.Errorf("%w: division reserve %v: want a finite rate of at least 0", ErrInvalid, c.Reserve)
	case !(c.Margin >= 0 && c.Margin <= 1):
		return fmt.Errorf("%w: division margin %v: want [0, 1]", ErrInvalid, c.Margin)
	case !(c.Hysteresis >= 0 && c.Hysteresis < 1):
		return fmt.Errorf("%w: division hysteresis %v: want [0, 1)", ErrInvalid, c.Hysteresis)
	}
	return nil
}

// member is one Envoy's state in a division.
type member struct {
	id       uint64
	w        float64 // Assign's scratch: want
	demand   float64 // requests per second, from the last report
	known    bool    // a report with a time_elapsed was received
	live     bool    // its stream is open
	share    float64 // what it was last sent (its effective share)
	sent     bool
	sentAt   time.Time
	target   float64 // the last computed share
	due      bool    // Assign's scratch: to be sent
	moved    bool    // Assign's scratch: its target is a change to send
	reported time.Time
}

// Division divides one bucket's fleet-wide limit among the Envoys that
// report on it, max-min fair on their recent demand. It is a pure state
// machine: it starts no goroutines, reads no clock (every method takes
// now), and is not safe for concurrent use.
//
// Its invariant: the shares sent and not yet expired sum to at most the
// limit. A change of a share within the hysteresis is not sent unless the
// sum needs it (so steady demand does not churn assignments), and an
// Envoy that left keeps its last share, counted against the limit, until
// that assignment's TTL has passed.
type Division struct {
	cfg     DivisionConfig
	members map[uint64]*member
	// live is the live members sorted by want (then id), kept between
	// calls so that Assign neither walks the map nor sorts anew: rebuilt
	// (from members) when a member joins or leaves or the configuration
	// changes, and put back in order when a report moved one want.
	live              []*member
	rebuild, unsorted bool
	leavers           int // members not live: expire walks the map only if any
	// capped says capacity, not the limit, is what Assign divides: the
	// division's part of a limit shared by a fleet (shared.go).
	capped   bool
	capacity float64
}

// NewDivision returns an empty division, or an error naming the bad field
// of cfg.
func NewDivision(cfg DivisionConfig) (*Division, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Division{cfg: cfg, members: map[uint64]*member{}}, nil
}

// Config returns the division's configuration.
func (d *Division) Config() DivisionConfig { return d.cfg }

// SetConfig changes the division's configuration (a reloaded rule); the
// next Assign uses it.
func (d *Division) SetConfig(cfg DivisionConfig) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	d.cfg = cfg
	d.rebuild = true // the wants change with the reserve and the margin
	return nil
}

// Join adds the Envoy id, live, with its demand unknown. Joining again
// (a stream that reports the bucket anew) only marks it live.
func (d *Division) Join(id uint64) {
	m := d.members[id]
	if m == nil {
		m = &member{id: id, live: true}
		d.members[id] = m
		d.rebuild = true
		return
	}
	if !m.live {
		m.live = true
		d.leavers--
		d.rebuild = true
	}
}

// Report records the Envoy id's usage: count requests (allowed and
// denied) over elapsed. An elapsed of 0 (Envoy's first report of a new
// bucket) leaves its demand unknown. The demand is capped at the limit, so
// no report can weigh more than the whole limit. An id not joined is
// joined.
func (d *Division) Report(id uint64, count uint64, elapsed time.Duration, now time.Time) {
	d.Join(id)
	m := d.members[id]
	m.reported = now
	if elapsed <= 0 {
		return
	}
	rate := float64(count) / elapsed.Seconds()
	m.demand = math.Min(rate, d.cfg.Limit)
	m.known = true
	if w := d.want(m); w != m.w {
		m.w = w
		d.unsorted = true
	}
}

// Leave marks the Envoy id gone (its stream ended): it takes no part in
// the next division, and its last share stays counted against the limit
// until its TTL has passed; Assign then forgets it.
func (d *Division) Leave(id uint64) {
	if m := d.members[id]; m != nil && m.live {
		m.live = false
		d.leavers++
		d.rebuild = true
	}
}

// Len returns how many Envoys the division holds, live or leaving.
func (d *Division) Len() int { return len(d.members) }

// Empty reports whether the division holds no Envoy: none live, and every
// leaver's share expired by now.
func (d *Division) Empty(now time.Time) bool {
	d.expire(now)
	return len(d.members) == 0
}

// expire forgets the leavers whose assignment has expired by now.
func (d *Division) expire(now time.Time) {
	if d.leavers == 0 {
		return
	}
	for id, m := range d.members {
		if !m.live && (!m.sent || !now.Before(m.sentAt.Add(d.cfg.TTL))) {
			delete(d.members, id)
			d.leavers--
		}
	}
}

// Assign divides the limit anew at now and calls send for every live Envoy
// whose assignment must be sent: its first, a change beyond the
// hysteresis, a fall the limit needs, or a refresh (the share in force,
// unchanged, once half its TTL has passed, at the Envoy's own report; past
// 5/6 of it, at any). share is in
// requests per second. send must not call back into d.
func (d *Division) Assign(now time.Time, send func(id uint64, share float64)) {
	d.expire(now)
	capacity := d.divided()
	if d.leavers > 0 {
		for _, m := range d.members {
			if !m.live {
				capacity -= m.share // held until its TTL
			}
		}
	}
	d.order()
	if capacity < 0 {
		capacity = 0
	}
	d.fill(capacity)
	// First the assignments that must go: a first one, a change beyond the
	// hysteresis either way, a refresh. If the shares then in force (those
	// sent, and the old ones of the rest) would pass the capacity, every
	// fall goes too: the targets sum to at most the capacity, and a rise
	// not sent holds less than its target.
	total := 0.0
	equal := 0.0
	if len(d.live) > 0 {
		equal = d.divided() / float64(len(d.live)) // of what this division divides: a fleet member's part
	}
	for _, m := range d.live {
		m.moved = !m.sent || math.Abs(m.target-m.share) > math.Max(m.share, equal)*d.cfg.Hysteresis+1e-9
		m.due = m.moved || d.refresh(m, now)
		if m.moved {
			total += m.target
		} else {
			total += m.share
		}
	}
	over := total > capacity*(1+1e-12)
	for _, m := range d.live {
		fall := over && m.target < m.share
		if !m.due && !fall {
			continue
		}
		share := m.target
		if !m.moved && !fall {
			// A refresh sends the share in force, unchanged: an Envoy takes
			// any change of the strategy for a new token bucket, and starts
			// it full, so a target drifting within the hysteresis (a
			// steady demand measured over real time wobbles, a capacity
			// granted by a fleet's owner moves in its last bits) would pass
			// the limit at every refresh.
			share = m.share
		}
		m.share, m.sent, m.sentAt = share, true, now
		send(m.id, share)
	}
}

// refresh reports whether m's unchanged assignment is to be sent again at
// now: once half its TTL has passed if m reported at now, else once 5/6 of
// it has (well after the report that follows the half, however late by
// a little: a refresh at another Envoy's report goes in a response of its
// own). An Envoy's refreshes then come at its own reports, those of all
// its buckets in one response rather than each whenever another Envoy
// reports on the bucket; and one whose report is late still gets its
// refresh before the TTL ends, from the others' reports.
func (d *Division) refresh(m *member, now time.Time) bool {
	age := now.Sub(m.sentAt)
	return age >= d.cfg.TTL/2 && (m.reported.Equal(now) || age >= d.cfg.TTL/6*5)
}

// want returns the demand the division assumes of m: the reserve while
// unknown, else its demand and the margin.
func (d *Division) want(m *member) float64 {
	if !m.known {
		return d.cfg.Reserve
	}
	return m.demand * (1 + d.cfg.Margin)
}

// order brings d.live up to date and in order of want, then id.
func (d *Division) order() {
	if d.rebuild {
		d.live = d.live[:0]
		for _, m := range d.members {
			if m.live {
				m.w = d.want(m)
				d.live = append(d.live, m)
			}
		}
		slices.SortFunc(d.live, func(a, b *member) int {
			if less(a, b) {
				return -1
			}
			return 1 // ids are distinct
		})
		d.rebuild, d.unsorted = false, false
		return
	}
	if !d.unsorted {
		return
	}
	// Insertion sort: a report moves one want, so the slice is sorted but
	// for that member, put back in place in one pass.
	live := d.live
	for i := 1; i < len(live); i++ {
		for j := i; j > 0 && less(live[j], live[j-1]); j-- {
			live[j], live[j-1] = live[j-1], live[j]
		}
	}
	d.unsorted = false
}

// less orders members by want, then id. Wants are finite: demands are
// capped at the limit.
func less(a, b *member) bool {
	return a.w < b.w || (a.w == b.w && a.id < b.id)
}

// fill sets the target of every live member in d.live, which is in order:
// max-min fair (water-filling) over capacity, then what no one asked for
// divided equally among all, so that a rising demand finds room before
// its next report. The targets sum to at most capacity.
func (d *Division) fill(capacity float64) {
	live := d.live
	left := capacity
	for i, m := range live {
		level := left / float64(len(live)-i)
		w := m.w
		if w > level {
			w = level
		}
		m.target = w
		left -= w
	}
	if left > 0 && len(live) > 0 {
		extra := left / float64(len(live))
		for _, m := range live {
			m.target += extra
		}
	}
}

// MemberShare is one Envoy's part of a division, as Shares reports it.
type MemberShare struct {
	ID uint64
	// Demand is its last reported demand in requests per second, with the
	// margin (the reserve while unknown); Share what it was last sent; Target the last
	// computed share.
	Demand, Share, Target float64
	// Live is false for an Envoy that left and still holds its share.
	Live bool
}

// Shares returns every member's part, sorted by id.
func (d *Division) Shares() []MemberShare {
	out := make([]MemberShare, 0, len(d.members))
	for id, m := range d.members {
		out = append(out, MemberShare{ID: id, Demand: d.want(m), Share: m.share, Target: m.target, Live: m.live})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
