package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	protocluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/labstack/echo"
)

// healthPollTimeout bounds one poll of a member's health endpoint. A poll
// that times out (the member is stopped, or paused) keeps the member
// listed until DeadAfter has passed since it last answered; one refused
// (nothing listens: the member closed or died) drops it at once.
const healthPollTimeout = time.Second

// healthProvider is the membership of Config.AutoManaged: every member
// serves its node (name, system id, advertised address) on its health
// endpoint and polls every endpoint in Hosts, each in a goroutine of its
// own, every Refresh. It replaces the engine's automanaged provider, which
// polls every endpoint in one round with a fixed 2 s timeout and drops a
// member that does not answer in time, whatever DeadAfter says: a member
// stopped for 2 s was dropped, and blocked for good.
type healthProvider struct {
	name      string
	hosts     []string
	refresh   time.Duration
	deadAfter time.Duration
	e         *echo.Echo
	client    *http.Client

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	// self is the member's system id; out, when set, is called (from a
	// poll's goroutine) when most of the other members that answered
	// within DeadAfter have blocked it, with how many members answered,
	// this one included (see outVoted).
	self string
	out  func(live int)

	mu    sync.Mutex
	nodes map[string]healthSeen // health endpoint -> what it last said
}

// healthNode is a health endpoint's answer: the member's node, in the
// engine's format, and the system ids the member has blocked (taken for
// dead or gone, for good), by which a member the others dropped sees that
// it was (rejoin.go). The engine's provider reads the node alone.
type healthNode struct {
	*automanaged.NodeModel
	Blocked []string `json:"blocked,omitempty"`
}

// healthSeen is a health endpoint's last answer and when it came.
type healthSeen struct {
	node    *automanaged.NodeModel
	blocked []string
	at      time.Time
}

var _ protocluster.ClusterProvider = (*healthProvider)(nil)

// newHealthProvider makes the provider of cfg.AutoManaged, its endpoint
// served by e, for the member of system id self.
func newHealthProvider(cfg Config, e *echo.Echo, self string) *healthProvider {
	return &healthProvider{
		self: self, name: cfg.Name, hosts: cfg.AutoManaged.Hosts, refresh: cfg.AutoManaged.Refresh,
		deadAfter: cfg.DeadAfter, e: e,
		client: &http.Client{Timeout: healthPollTimeout, Transport: &http.Transport{
			DialContext: (&net.Dialer{Timeout: healthPollTimeout}).DialContext, MaxIdleConnsPerHost: 1}},
		stop:  make(chan struct{}),
		nodes: make(map[string]healthSeen),
	}
}

// StartMember serves the endpoint and starts the polls.
func (p *healthProvider) StartMember(c *protocluster.Cluster) error {
	p.wg.Go(func() { _ = p.e.Start("") }) // e.Listener is set: Start serves it
	for _, h := range p.hosts {
		p.wg.Go(func() { p.poll(h) })
	}
	p.wg.Go(func() { p.publish(c) })
	return nil
}

// StartClient is StartMember without an endpoint of its own.
func (p *healthProvider) StartClient(c *protocluster.Cluster) error {
	for _, h := range p.hosts {
		p.wg.Go(func() { p.poll(h) })
	}
	p.wg.Go(func() { p.publish(c) })
	return nil
}

// Shutdown stops the endpoint (the others drop the member at their next
// poll) and the polls, and waits for them: a poll under way is cancelled.
func (p *healthProvider) Shutdown(bool) error {
	p.once.Do(func() {
		close(p.stop)
		_ = p.e.Close()
		if p.e.Listener != nil {
			_ = p.e.Listener.Close() // not served yet: Close left it open
		}
	})
	p.wg.Wait()
	return nil
}

// poll polls host's endpoint every refresh until Shutdown.
func (p *healthProvider) poll(host string) {
	t := time.NewTicker(p.refresh)
	defer t.Stop()
	for {
		node, err := p.get(host)
		p.mu.Lock()
		switch {
		case err == nil:
			p.nodes[host] = healthSeen{node.NodeModel, node.Blocked, time.Now()}
		case !isTimeout(err):
			delete(p.nodes, host) // refused, or a bad answer: gone
		}
		var out bool
		live := 0
		if err == nil && p.out != nil {
			out, live = p.outVoted(time.Now())
		}
		p.mu.Unlock()
		if out {
			p.out(live)
		}
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
	}
}

// outVoted reports whether more than half of the other members of the
// cluster that answered within DeadAfter of now (at least one) list this
// member's system id as blocked, and how many members answered, this one
// included. A member the others dropped blocks them too, often, when it
// runs again (their heartbeats are old to it): each of them is blocked by
// that member alone, not by most. Two members that blocked each other
// are both out voted. p.mu is held.
func (p *healthProvider) outVoted(now time.Time) (bool, int) {
	others, against := 0, 0
	for _, s := range p.nodes {
		if s.node.ClusterName != p.name || s.node.ID == p.self || now.Sub(s.at) > p.deadAfter {
			continue
		}
		others++
		if slices.Contains(s.blocked, p.self) {
			against++
		}
	}
	return against > 0 && 2*against > others, others + 1
}

// get asks host's endpoint for its node.
func (p *healthProvider) get(host string) (*healthNode, error) {
	ctx, cancel := context.WithTimeout(context.Background(), healthPollTimeout)
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/_health", nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("cluster: health endpoint %s answered %s", host, resp.Status)
	}
	n := healthNode{NodeModel: &automanaged.NodeModel{}}
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil {
		return nil, fmt.Errorf("cluster: health endpoint %s: %w", host, err)
	}
	return &n, nil
}

// isTimeout reports whether err is a poll that got no answer in time (the
// member may be stopped), not a refusal.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// publish tells the engine, every refresh, the members that answered
// within DeadAfter and were not refused since.
func (p *healthProvider) publish(c *protocluster.Cluster) {
	t := time.NewTicker(p.refresh)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		var members []*protocluster.Member
		p.mu.Lock()
		for _, s := range p.nodes {
			if s.node.ClusterName == p.name && now.Sub(s.at) <= p.deadAfter {
				members = append(members, &protocluster.Member{Id: s.node.ID, Host: s.node.Address, Port: int32(s.node.Port), Kinds: s.node.Kinds})
			}
		}
		p.mu.Unlock()
		if len(members) > 0 {
			c.MemberList.UpdateClusterTopology(members)
		}
	}
}
