package cluster

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// The quota path: a member's Rate Limit Quota Service sends, every
// interval, the demand of the Envoys connected to it on each quota bucket
// to the bucket's owner (the member that owns the partition of the
// bucket's key, as for an id), whose Divider divides the bucket's limit
// over every member's demand and answers each member its share. The
// messages are QuotaRequest and QuotaReply; what a member takes of them is
// bounded as below and checked whole before any is used (see check.go).

// Bounds of a QuotaRequest.
const (
	// MaxQuotaKeyLength is the longest bucket key a member takes.
	MaxQuotaKeyLength = actorlimit.MaxIDLength
	// MaxQuotaWants is the most groups of Envoys' demands one bucket's
	// demand may carry; a member with more groups merges neighbours.
	MaxQuotaWants = 64
	// MaxQuotaDemands is the most buckets one request carries; a member
	// with more sends several.
	MaxQuotaDemands = 1024
	// maxQuotaTTL is the longest time to live a demand may give.
	maxQuotaTTL = 24 * time.Hour
)

// QuotaWant is Envoys Envoys that each want Rate requests per second.
type QuotaWant struct {
	Rate   float64
	Envoys uint32
}

// QuotaDemand is one bucket's demand on one member: its Envoys' wants,
// the shares its Envoys that left still hold (Leaving), and the share it
// applies now (InForce), all in requests per second, with the bucket's
// fleet-wide Limit and its assignments' TTL.
type QuotaDemand struct {
	Key              string
	Limit            float64
	TTL              time.Duration
	Wants            []QuotaWant
	Leaving, InForce float64
}

// QuotaGrant is a member's share of one bucket's limit, in requests per
// second; OK is false when the owner did not answer for the bucket (it
// could not be reached, or did not own it).
type QuotaGrant struct {
	Share float64
	OK    bool
}

// Divider divides the limits of the quota buckets this member owns. Divide
// answers member from's demands at once (it is called by the member's
// actor: it must not block), writing out[i] for demands[i]; it is safe
// for concurrent use.
type Divider interface {
	Divide(from string, demands []QuotaDemand, out []QuotaGrant)
}

// dividerBox holds a Divider in an atomic.Pointer.
type dividerBox struct{ d Divider }

// SetDivider makes d answer the quota demands of the buckets this member
// owns; without one a member refuses them.
func (m *Member) SetDivider(d Divider) { m.divider.Store(&dividerBox{d}) }

// DivideQuotas sends each bucket's demand to the bucket's owner, one
// request per owner (a few if they are many), all at once, and returns the
// grants in the demands' order. A bucket whose owner does not answer
// within the sync timeout (4 × SyncEvery, at least 100 ms) or ctx, or
// refuses it, gets a grant that is not OK; a refused one is sent once more
// to the owner the refusing member names.
func (m *Member) DivideQuotas(ctx context.Context, demands []QuotaDemand) []QuotaGrant {
	out := make([]QuotaGrant, len(demands))
	if err := m.enter(ctx); err != nil {
		return out
	}
	defer m.mu.RUnlock()
	deadline := time.Now().Add(m.bound(m.cfg.syncTimeout()))
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	byAddr := map[string][]int{}
	for i := range demands {
		if a := m.route(m.partition(demands[i].Key)); a != "" {
			byAddr[a] = append(byAddr[a], i)
		}
	}
	for try := 0; try < 2 && len(byAddr) > 0; try++ {
		var mu sync.Mutex
		again := map[string][]int{}
		var wg sync.WaitGroup
		for addr, idx := range byAddr {
			wg.Add(1)
			go func() {
				defer wg.Done()
				hints := m.askQuotas(addr, demands, idx, out, deadline)
				mu.Lock()
				defer mu.Unlock()
				for i, h := range hints {
					if h != "" && h != addr {
						again[h] = append(again[h], i)
					}
				}
			}()
		}
		wg.Wait()
		byAddr = again
	}
	return out
}

// askQuotas sends the demands idx to the member at addr, in requests of at
// most MaxQuotaDemands demands and MaxMessageBytes/2 bytes, writing the
// grants to out; it returns, for each demand refused, the owner the member
// named.
func (m *Member) askQuotas(addr string, demands []QuotaDemand, idx []int, out []QuotaGrant, deadline time.Time) map[int]string {
	hints := map[int]string{}
	for len(idx) > 0 {
		req := &clusterpb.QuotaRequest{Node: m.node, KeyPrint: m.hash.print}
		size := 0
		n := 0
		for n < len(idx) && n < MaxQuotaDemands {
			d := quotaDemandToWire(&demands[idx[n]])
			s := proto.Size(d)
			if n > 0 && size+s > MaxMessageBytes/2 {
				break
			}
			req.Demands = append(req.Demands, d)
			size += s
			n++
		}
		var resp any
		var err error
		if addr == m.node {
			resp = m.handleQuota(req)
		} else {
			resp, err = m.ask(addr, req, deadline)
		}
		reply, ok := resp.(*clusterpb.QuotaReply)
		if err != nil || !ok || len(reply.GetGrants()) != n {
			m.cfg.Logger.Debug("actorlimit cluster: quota demand not answered", "member", addr, "buckets", n, "error", err)
		} else {
			for j, g := range reply.GetGrants() {
				if g.GetRefused() {
					hints[idx[j]] = g.GetOwner()
					continue
				}
				out[idx[j]] = QuotaGrant{Share: g.GetShare(), OK: true}
			}
		}
		idx = idx[n:]
	}
	return hints
}

func quotaDemandToWire(d *QuotaDemand) *clusterpb.QuotaDemand {
	w := &clusterpb.QuotaDemand{Key: d.Key, Limit: d.Limit, TtlNs: int64(d.TTL), Leaving: d.Leaving, InForce: d.InForce,
		Wants: make([]*clusterpb.QuotaWant, len(d.Wants))}
	for i, q := range d.Wants {
		w.Wants[i] = &clusterpb.QuotaWant{Rate: q.Rate, Envoys: q.Envoys}
	}
	return w
}

// handleQuota answers a QuotaRequest as the owner of the buckets it names:
// those whose partition it does not own (now) are refused, naming the
// owner it knows. A request that fails the checks is rejected whole, and
// one from a member not in this member's view, or to a member with no
// Divider, refused whole: both are answered with no grant, which the
// sender takes for no answer.
func (m *Member) handleQuota(req *clusterpb.QuotaRequest) *clusterpb.QuotaReply {
	if !m.keyOK(req.GetNode(), req.GetKeyPrint()) {
		return &clusterpb.QuotaReply{}
	}
	if err := m.peerCheck().checkQuota(req); err != nil {
		m.reject("quota", err)
		return &clusterpb.QuotaReply{}
	}
	box := m.divider.Load()
	if box == nil || !m.peerSync(req.GetNode()) {
		m.counters.refusals.Add(1)
		return &clusterpb.QuotaReply{}
	}
	reply := &clusterpb.QuotaReply{Grants: make([]*clusterpb.QuotaGrant, len(req.GetDemands()))}
	var owned []QuotaDemand
	var at []int
	for i, w := range req.GetDemands() {
		p := m.partition(w.GetKey())
		if !m.named() || m.leaving.Load() || m.parts[p].owned.Load() == nil {
			m.counters.refusals.Add(1)
			reply.Grants[i] = &clusterpb.QuotaGrant{Refused: true, Owner: m.hint(p)}
			continue
		}
		d := QuotaDemand{Key: w.GetKey(), Limit: w.GetLimit(), TTL: time.Duration(w.GetTtlNs()),
			Leaving: w.GetLeaving(), InForce: w.GetInForce(), Wants: make([]QuotaWant, len(w.GetWants()))}
		for j, q := range w.GetWants() {
			d.Wants[j] = QuotaWant{Rate: q.GetRate(), Envoys: q.GetEnvoys()}
		}
		owned = append(owned, d)
		at = append(at, i)
	}
	grants := make([]QuotaGrant, len(owned))
	box.d.Divide(req.GetNode(), owned, grants)
	for j, i := range at {
		if grants[j].OK {
			reply.Grants[i] = &clusterpb.QuotaGrant{Share: grants[j].Share}
		} else {
			reply.Grants[i] = &clusterpb.QuotaGrant{Refused: true}
		}
	}
	return reply
}

// checkQuota checks a quota request: the sender's name; at most
// MaxQuotaDemands demands, each with a key of 1 to MaxQuotaKeyLength
// bytes, a finite limit above 0, a TTL above 0 and at most a day, at most
// MaxQuotaWants wants, each of a finite rate of at least 0 and at least
// one Envoy, and finite leaving and in-force shares of at least 0.
func (pc peerCheck) checkQuota(req *clusterpb.QuotaRequest) error {
	if err := pc.node(req.GetNode()); err != nil {
		return err
	}
	if n := len(req.GetDemands()); n > MaxQuotaDemands {
		return fmt.Errorf("%w: %d quota demands, more than %d", errPeer, n, MaxQuotaDemands)
	}
	rate := func(what string, v float64) error {
		if !(v >= 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: %s %v: want a finite rate of at least 0", errPeer, what, v)
		}
		return nil
	}
	for _, d := range req.GetDemands() {
		switch k := d.GetKey(); {
		case k == "" || len(k) > MaxQuotaKeyLength:
			return fmt.Errorf("%w: a quota key of %d bytes, not 1 to %d", errPeer, len(k), MaxQuotaKeyLength)
		case !(d.GetLimit() > 0) || math.IsInf(d.GetLimit(), 0):
			return fmt.Errorf("%w: a quota limit of %v: want a finite rate above 0", errPeer, d.GetLimit())
		case d.GetTtlNs() <= 0 || d.GetTtlNs() > int64(maxQuotaTTL):
			return fmt.Errorf("%w: a quota TTL of %v: want above 0 and at most %v", errPeer, time.Duration(d.GetTtlNs()), maxQuotaTTL)
		case len(d.GetWants()) > MaxQuotaWants:
			return fmt.Errorf("%w: %d quota wants, more than %d", errPeer, len(d.GetWants()), MaxQuotaWants)
		}
		if err := rate("a quota's leaving shares", d.GetLeaving()); err != nil {
			return err
		}
		if err := rate("a quota's share in force", d.GetInForce()); err != nil {
			return err
		}
		for _, w := range d.GetWants() {
			if err := rate("a quota want", w.GetRate()); err != nil {
				return err
			}
			if w.GetEnvoys() == 0 {
				return fmt.Errorf("%w: a quota want of no Envoy", errPeer)
			}
		}
	}
	return nil
}
