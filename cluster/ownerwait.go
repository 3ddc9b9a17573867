package cluster

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
	"github.com/actorlimit/actorlimit/table"
)

// Owner mode through an owner that does not answer. A check waits at most
// Config.OwnerWait for its owner; then the member decides it on its share
// of the policy (share), on a table of its own that counts only the hits
// it decided so (the owner has the others), and keeps the request, as a
// charge, for the owner: the next sync rounds send it until the owner, or
// the partition's next owner, takes it. Each request carries an id that
// the owner remembers (remembered): the same request sent again, after an
// answer lost, is answered from the first decision, and a charge of a
// request the owner decided after all counts nothing.

// strictKey is the context key of WithStrict.
type strictKey struct{}

// WithStrict returns a context under which an Owner-mode check never falls
// back to the member's share: it waits up to Config.RequestTimeout for its
// owner and fails if none answers, as with Config.Strict. For callers who
// prefer an error to an inexact answer on some calls only.
func WithStrict(ctx context.Context) context.Context {
	return context.WithValue(ctx, strictKey{}, true)
}

// strictIn reports whether ctx comes from WithStrict.
func strictIn(ctx context.Context) bool {
	v, _ := ctx.Value(strictKey{}).(bool)
	return v
}

// shareShards is how many locks the fallback's share tables are spread
// over.
const shareShards = 16

// maxCharges bounds the checks a member keeps for owners that do not
// answer; beyond it, a fallback's request is not kept (counted in
// SyncStats.ChargesDropped).
const maxCharges = 1 << 16

// chargeBatch is the most requests one charge message carries.
const chargeBatch = 256

// maxAttempts is the most times a check's request is sent while it waits.
const maxAttempts = 5

// ownerFallback is a member's Owner-mode fallback: its share tables, the
// charges it keeps for owners, its requests' ids, and, as an owner, the
// requests it answered.
type ownerFallback struct {
	idBase atomic.Uint64
	seed   maphash.Seed
	calls  sync.Map // request id -> *decideCall, while the call waits
	used   atomic.Bool
	shards [shareShards]shareShard

	mu      sync.Mutex
	charges map[int][]*clusterpb.Charge // partition -> requests to charge, oldest first
	queued  int                         // their checks
	sweep   int64                       // when the share tables are next swept

	mem *remembered
	rtt rttTable // the round trips to the owners (rtt.go)
}

// shareShard is one lock's share of the fallback's tables.
type shareShard struct {
	mu sync.Mutex
	t  *table.Table
}

// init readies f for a member of cfg.
func (f *ownerFallback) init(cfg Config) {
	f.idBase.Store(rand.Uint64())
	f.seed = maphash.MakeSeed()
	per := 0
	if cfg.MaxCopies > 0 {
		per = (cfg.MaxCopies + shareShards - 1) / shareShards
	}
	for i := range f.shards {
		f.shards[i].t = table.New(per)
	}
	f.charges = make(map[int][]*clusterpb.Charge)
	f.mem = newRemembered(rememberFactor * cfg.RequestTimeout)
}

// nextID returns a new request id: random start, then counting, never 0.
func (f *ownerFallback) nextID() uint64 {
	for {
		if id := f.idBase.Add(1); id != 0 {
			return id
		}
	}
}

func (f *ownerFallback) shard(id string) *shareShard {
	return &f.shards[maphash.String(f.seed, id)%shareShards]
}

// decideCall is one Owner-mode request while the check waits for it, and
// after: the attempts sent, their outcome, and whether the caller fell
// back.
type decideCall struct {
	p      int
	n      int           // the checks
	owner  string        // the owner's address when the check was sent
	sent   time.Time     // when the check was sent
	wait   time.Duration // the OwnerWait in force for owner when it was sent
	req    *clusterpb.DecideRequest
	moving atomic.Int64 // wall clock (ns) of the last answer that the partition is moving

	mu       sync.Mutex
	running  int
	reply    *clusterpb.DecideReply // the owner's decisions, once in
	err      error                  // the last attempt's error
	late     bool                   // an attempt was answered late
	fellBack *clusterpb.Charge      // set when the caller fell back
	queued   bool
	wake     chan struct{} // an attempt ended
}

// noteMoving records, for the call of req, that resp refused it because the
// partition is on its way between two live members.
func (m *Member) noteMoving(req *clusterpb.DecideRequest, resp any) {
	r, ok := resp.(*clusterpb.DecideReply)
	if !ok || !r.GetMoving() || req.GetRequestId() == 0 {
		return
	}
	if c, ok := m.fb.calls.Load(req.GetRequestId()); ok {
		c.(*decideCall).moving.Store(time.Now().UnixNano())
	}
}

// moving reports whether partition p, which this member does not own, is
// on its way between live members: this member hands it on, or waits for
// it.
func (m *Member) moving(p int) bool {
	m.own.mu.Lock()
	defer m.own.mu.Unlock()
	_, waiting := m.own.waiting[p]
	return m.own.handing[p] != nil || waiting
}

// decideOwner has partition p's owner decide checks (Owner mode), writing
// its decisions to out. The request goes at once, and again (same id: the
// owner counts it once) when no answer came after OwnerWait/2 (with an
// adaptive OwnerWait, a round trip to that owner: see rtt.go), then after
// twice as long, and so on. When no answer came after OwnerWait (a
// partition on the move between live members extends it, to
// RequestTimeout at most: a member answers that it hands the partition on
// or waits for it), the member decides the checks on its share
// (decideShare) and keeps them for the owner. An owner that answers that
// the request came late while the member still waits (their clocks are
// apart) is asked again without the check. In strict mode the member
// waits up to RequestTimeout, and fails.
func (m *Member) decideOwner(ctx context.Context, p int, checks []algo.Check, out []algo.Decision) error {
	strict := m.cfg.Strict || strictIn(ctx)
	start := time.Now()
	sent := m.cfg.Clock.Now().UnixNano()
	req := &clusterpb.DecideRequest{Checks: make([]*clusterpb.Check, len(checks)), Partition: uint32(p),
		RequestId: m.fb.nextID(), SentNs: sent, KeyPrint: m.hash.print}
	for i := range checks {
		req.Checks[i] = checkToWire(&checks[i])
	}
	owner := m.route(p)
	ownerWait, retry := m.ownerWait(owner)
	if !strict {
		req.LateNs = int64(2 * ownerWait)
	}
	if m.engine() != nil && owner == m.node {
		// This member owns the partition: the owner's answer is a call
		// away, with no network to wait on.
		if resp, ok := m.serve(req).(*clusterpb.DecideReply); ok && !resp.GetRefused() {
			reply, err := checkReply(p, len(checks), resp)
			switch {
			case err == nil:
				return m.decided(checks, reply, out)
			case errors.Is(err, errDecide):
				return err
			}
		}
	}
	call := &decideCall{p: p, n: len(checks), req: req, owner: owner, sent: start, wait: ownerWait, wake: make(chan struct{}, maxAttempts+1)}
	if !strict && m.rejoining.Load() {
		// The member is rejoining the cluster (rejoin.go): no owner can
		// be reached until it has; the charge goes to the owner after.
		m.fallBack(call, checks, out)
		return nil
	}
	m.fb.calls.Store(req.RequestId, call)
	defer m.fb.calls.Delete(req.RequestId)
	wait := ownerWait
	if strict {
		wait = m.cfg.RequestTimeout
	}
	hard := start.Add(m.cfg.RequestTimeout)
	fallAt := start.Add(wait)
	nextTry := start.Add(retry)
	attempts, relaxed := 1, false
	m.attempt(call, req)
	timer := time.NewTimer(min(retry, wait))
	defer timer.Stop()
	for {
		call.mu.Lock()
		reply, err, late := call.reply, call.err, call.late
		call.mu.Unlock()
		if reply != nil {
			return m.decided(checks, reply, out)
		}
		if errors.Is(err, errDecide) {
			return err
		}
		now := time.Now()
		if mv := call.moving.Load(); !strict && mv > 0 {
			// The partition is on its way between live members: wait for
			// it, as long as they keep saying so.
			fallAt = maxTime(fallAt, time.Unix(0, mv).Add(ownerWait))
		}
		switch {
		case strict && !now.Before(hard):
			if err == nil {
				return fmt.Errorf("cluster: partition %d: no answer in %v", p, m.cfg.RequestTimeout)
			}
			return err // it names the partition
		case !strict && (!now.Before(fallAt) || !now.Before(hard)):
			m.fallBack(call, checks, out)
			if m.cfg.onFallback != nil {
				m.cfg.onFallback(owner, start, fallAt, now, time.Time{})
			}
			return nil
		case late && !relaxed && attempts < maxAttempts:
			// The owner's clock says the request came late though we
			// still wait for it: the clocks are apart. Ask again without
			// the check.
			again := proto.Clone(req).(*clusterpb.DecideRequest)
			again.LateNs = 0
			attempts, relaxed = attempts+1, true
			m.counters.retries.Add(1)
			m.attempt(call, again)
		case !now.Before(nextTry) && attempts < maxAttempts && m.mayAnswer(owner, now, fallAt, strict):
			attempts++
			retry *= 2
			nextTry = now.Add(retry)
			m.counters.retries.Add(1)
			m.attempt(call, proto.Clone(req).(*clusterpb.DecideRequest))
		}
		next := hard
		if !strict && fallAt.Before(hard) {
			next = fallAt
		}
		if attempts < maxAttempts && nextTry.Before(next) {
			next = nextTry
		}
		timer.Reset(max(time.Until(next), 0))
		select {
		case <-timer.C:
		case <-call.wake: // timer.Reset above drops a tick not taken (Go 1.23)
		case <-ctx.Done():
			return fmt.Errorf("actorlimit: %w", ctx.Err())
		}
	}
}

// mayAnswer reports whether a check's request sent again to owner at now
// may be answered before the check falls back at fallAt: with an adaptive
// OwnerWait, not when the round trip measured to owner ends after it (a
// request sent again goes on the same stream as the first, behind it: it
// helps only when the first was lost, and then only if its answer can come
// in time). A strict check, and one of a fixed OwnerWait, always may.
func (m *Member) mayAnswer(owner string, now, fallAt time.Time, strict bool) bool {
	if strict || !m.cfg.ownerWaitAuto {
		return true
	}
	srtt, _, _, ok := m.fb.rtt.get(owner, now)
	return !ok || now.Add(srtt).Before(fallAt)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// errDecide is an attempt's error that the owner answered: the checks are
// not valid there, or the answer does not fit them. errLate is the owner's
// answer that the request came late.
var (
	errDecide = errors.New("the owner's answer")
	errLate   = errors.New("the owner took the request for late")
)

// attempt sends req, call's request, in the background, and records what
// comes back.
func (m *Member) attempt(call *decideCall, req *clusterpb.DecideRequest) {
	call.mu.Lock()
	call.running++
	call.mu.Unlock()
	go func() {
		sent := time.Now()
		resp, err := m.send(call.p, req)
		var reply *clusterpb.DecideReply
		if err == nil {
			reply, err = checkReply(call.p, call.n, resp)
		}
		if reply != nil {
			m.fb.rtt.sampleAnswer(call.owner, time.Since(sent), call.wait)
		}
		call.mu.Lock()
		call.running--
		if reply != nil && call.reply == nil {
			call.reply = reply
			if call.fellBack != nil {
				// The owner decided the request after all, after the
				// caller fell back: it has the hits.
				m.counters.charged.Add(uint64(call.n))
				if m.cfg.onFallback != nil {
					m.cfg.onFallback(call.owner, call.sent, time.Time{}, time.Time{}, time.Now())
				}
			}
		}
		if errors.Is(err, errLate) {
			call.late = true
		} else if err != nil {
			call.err = err
		}
		enqueue := call.fellBack != nil && call.reply == nil && call.running == 0 && !call.queued
		if enqueue {
			call.queued = true
		}
		call.mu.Unlock()
		if enqueue {
			m.keepCharge(call.p, call.fellBack, call.n)
		}
		call.wake <- struct{}{}
	}()
}

// checkReply returns resp as the owner's decisions of n checks of
// partition p, or why not: errDecide wrapped where the owner answered
// with an error or an answer that does not fit, errLate where it took the
// request for late.
func checkReply(p, n int, resp any) (*clusterpb.DecideReply, error) {
	reply, ok := resp.(*clusterpb.DecideReply)
	switch {
	case !ok:
		return nil, fmt.Errorf("cluster: partition %d answered %T: %w", p, resp, errDecide)
	case reply.GetError() != "":
		return nil, fmt.Errorf("cluster: partition %d: %s: %w", p, reply.GetError(), errDecide)
	case reply.GetLate():
		return nil, errLate
	case len(reply.GetDecisions()) != n:
		return nil, fmt.Errorf("cluster: partition %d answered %d decisions for %d checks: %w", p, len(reply.GetDecisions()), n, errDecide)
	}
	return reply, nil
}

// decided writes the owner's decisions to out; the member's share tables
// forget the keys the owner decided (the next fallback counts from here).
func (m *Member) decided(checks []algo.Check, reply *clusterpb.DecideReply, out []algo.Decision) error {
	for i, d := range reply.GetDecisions() {
		out[i] = decisionFromWire(d)
	}
	if m.fb.used.Load() {
		for i := range checks {
			s := m.fb.shard(checks[i].ID)
			s.mu.Lock()
			s.t.Delete(keyOf(&checks[i]).table())
			s.mu.Unlock()
		}
	}
	return nil
}

// fallBack decides call's checks on the member's share, writes the
// decisions to out, and keeps the request for its owner: now if no attempt
// is under way, else when the last one ends without the owner's decision.
func (m *Member) fallBack(call *decideCall, checks []algo.Check, out []algo.Decision) {
	allowed := m.decideShare(checks, out)
	ch := &clusterpb.Charge{RequestId: call.req.GetRequestId(), SentNs: call.req.GetSentNs(),
		Checks: call.req.GetChecks(), Allowed: allowed}
	m.counters.ownerFallbacks.Add(uint64(len(checks)))
	call.mu.Lock()
	call.fellBack = ch
	enqueue := call.reply == nil && call.running == 0 && !call.queued
	if enqueue {
		call.queued = true
	}
	if call.reply != nil {
		m.counters.charged.Add(uint64(call.n)) // decided meanwhile
	}
	call.mu.Unlock()
	if enqueue {
		m.keepCharge(call.p, ch, call.n)
	}
}

// decideShare decides checks at once on the member's share of each policy
// (see share: the limit, and a bucket's burst, divided by the live
// members), on its own table, which counts the hits decided so since the
// owner last answered for the key; a reset forgets the key there. It
// returns which checks were hits allowed.
func (m *Member) decideShare(checks []algo.Check, out []algo.Decision) []bool {
	m.fb.used.Store(true)
	now := m.cfg.Clock.Now().UnixNano()
	live := m.live.Load()
	allowed := make([]bool, len(checks))
	for i := range checks {
		c := &checks[i]
		s := m.fb.shard(c.ID)
		s.mu.Lock()
		if c.Op == algo.OpReset {
			s.t.Delete(keyOf(c).table())
			out[i] = algo.Decision{}
		} else {
			sc := share(*c, live)
			out[i] = s.t.Apply(&sc, now)
			allowed[i] = c.Op == algo.OpHit && out[i].Allowed
		}
		s.mu.Unlock()
	}
	return allowed
}

// keepCharge keeps ch, a request of n checks of partition p decided on the
// member's share, for p's owner; when maxCharges checks are kept already,
// it is dropped and counted.
func (m *Member) keepCharge(p int, ch *clusterpb.Charge, n int) {
	m.fb.mu.Lock()
	defer m.fb.mu.Unlock()
	if m.fb.queued+n > maxCharges {
		m.counters.chargesDropped.Add(uint64(n))
		return
	}
	m.fb.queued += n
	m.fb.charges[p] = append(m.fb.charges[p], ch)
}

// sendCharges sends the charges kept for each partition's owner, up to
// chargeBatch requests a partition, one request per partition, all at
// once, and waits for the answers: those taken are dropped, the others
// sent again by the next round. Every SweepEvery it also forgets the share
// tables' ended states. The sync runs it in Owner mode.
func (m *Member) sendCharges(now int64) {
	m.fb.mu.Lock()
	batches := make(map[int][]*clusterpb.Charge, len(m.fb.charges))
	for p, chs := range m.fb.charges {
		// At most chargeBatch requests, and under MaxMessageBytes (one
		// request at least).
		n, size := 0, 0
		for n < min(len(chs), chargeBatch) {
			size += proto.Size(chs[n]) + 8
			if n > 0 && size > pieceBudget {
				break
			}
			n++
		}
		batches[p] = chs[:n:n]
	}
	sweep := now >= m.fb.sweep
	if sweep {
		m.fb.sweep = now + int64(m.cfg.SweepEvery)
	}
	m.fb.mu.Unlock()
	if sweep {
		for i := range m.fb.shards {
			s := &m.fb.shards[i]
			s.mu.Lock()
			s.t.Expire(now, 0)
			s.mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	for p, batch := range batches {
		wg.Go(func() {
			resp, err := m.send(p, &clusterpb.DecideRequest{Partition: uint32(p), Charges: batch, KeyPrint: m.hash.print})
			if r, ok := resp.(*clusterpb.DecideReply); err != nil || !ok || r.GetError() != "" || r.GetRefused() {
				return
			}
			n := 0
			for _, ch := range batch {
				n += len(ch.GetChecks())
			}
			m.counters.charged.Add(uint64(n))
			m.fb.mu.Lock()
			defer m.fb.mu.Unlock()
			m.fb.queued -= n
			if rest := m.fb.charges[p][len(batch):]; len(rest) > 0 {
				m.fb.charges[p] = rest
			} else {
				delete(m.fb.charges, p)
			}
		})
	}
	wg.Wait()
}

// pendingCharges returns how many checks decided on the member's share
// wait for their owner.
func (m *Member) pendingCharges() int {
	m.fb.mu.Lock()
	defer m.fb.mu.Unlock()
	return m.fb.queued
}
