package redisstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlimit/actorlimit/algo"
)

// send decides checks in one round trip: a lone command goes as itself, more
// as one pipeline. A second round trip comes only for the scripts that Redis
// no longer had (NOSCRIPT), which changed nothing and are loaded and sent
// again in order.
func (s *Store) send(ctx context.Context, now int64, checks []algo.Check, out []algo.Decision) error {
	ctx = withDeadline(ctx, time.Now().Add(s.cfg.timeout))
	s.calls = s.calls[:0]
	s.pipe = s.pipe[:0]
	for i := range checks {
		s.calls = append(s.calls, s.plan(ctx, now, &checks[i]))
		if cmd := s.calls[i].cmd; cmd != nil {
			s.pipe = append(s.pipe, cmd)
		}
	}
	switch len(s.pipe) {
	case 0:
	case 1:
		if err := s.client.Process(ctx, s.pipe[0]); err != nil && !isNoScript(err) {
			return err
		}
	default:
		p := s.client.Pipeline()
		_ = p.BatchProcess(ctx, s.pipe...)
		if cmds, err := p.Exec(ctx); err != nil && !onlyNoScript(cmds) {
			return err
		}
	}
	if err := s.reload(ctx); err != nil {
		return err
	}
	for i := range checks {
		out[i] = s.decision(&checks[i], &s.calls[i], now)
	}
	return nil
}

// deadlineCtx is ctx with a deadline that it reports but arms no timer
// for: Done and Err are the parent's, and Err is DeadlineExceeded once the
// deadline has passed. go-redis bounds a round trip by the deadline alone:
// it sets the connection's read and write deadlines from it
// (Options.ContextTimeoutEnabled) and net.Dialer its dial's. It replaces
// context.WithTimeout, whose timer, armed and stopped at every round trip,
// woke another thread each time: at one caller 10% of the CPU profile was
// that timer's futex wakeups, and the wakeups sat on the latency path.
// Only a wait for a pooled connection is left to the pool's own timeout.
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func withDeadline(ctx context.Context, d time.Time) context.Context {
	if old, ok := ctx.Deadline(); ok && old.Before(d) {
		return ctx
	}
	return &deadlineCtx{ctx, d}
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineCtx) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// onlyNoScript reports whether every failed command failed for NOSCRIPT,
// which changed nothing.
func onlyNoScript(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if err := c.Err(); err != nil && !isNoScript(err) {
			return false
		}
	}
	return true
}

func isNoScript(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") }

// reload loads the scripts again and sends the commands that failed for
// NOSCRIPT, in their order, in one pipeline.
func (s *Store) reload(ctx context.Context) error {
	var again []*redis.Cmd
	for _, c := range s.pipe {
		if isNoScript(c.Err()) {
			again = append(again, c.(*redis.Cmd))
		}
	}
	if len(again) == 0 {
		return nil
	}
	s.stats.reloads.Add(1)
	for _, sc := range []*redis.Script{fixedLua, countLua, drainLua} {
		if err := sc.Load(ctx, s.client).Err(); err != nil {
			return err
		}
	}
	p := s.client.Pipeline()
	fresh := make(map[*redis.Cmd]*redis.Cmd, len(again))
	for _, c := range again {
		fresh[c] = p.EvalSha(ctx, c.Args()[1].(string), []string{c.Args()[3].(string)}, c.Args()[4:]...)
	}
	if _, err := p.Exec(ctx); err != nil && !onlyNoScript(p2cmds(fresh)) {
		return err
	}
	for i := range s.calls {
		if f, ok := fresh[s.calls[i].cmd]; ok {
			s.calls[i].cmd = f
		}
	}
	return nil
}

func p2cmds(m map[*redis.Cmd]*redis.Cmd) []redis.Cmder {
	out := make([]redis.Cmder, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	return out
}

// plan returns c's command, built whole here (the arguments as numbers,
// which go-redis writes without a string each), or decides c here when
// Redis has nothing to say (a bucket whose limit is 0).
func (s *Store) plan(ctx context.Context, now int64, c *algo.Check) call {
	k := s.key(c)
	if c.Op == algo.OpReset {
		return call{local: true, cmd: redis.NewCmd(ctx, "del", k)}
	}
	op := "0"
	if c.Op == algo.OpPeek {
		op = "1"
	}
	n := c.N
	if c.Op == algo.OpPeek {
		n = 1
	}
	// evalsha, sha, 1 key, the key, then ARGV (see scripts.go).
	args := make([]any, 0, 13)
	args = append(args, "evalsha", "", 1, k, op, "1", 0, 0)
	if s.cfg.callerTime {
		m := floorDiv(now, ms)
		args[5], args[6], args[7] = "0", m, now-m*ms
	}
	pms := int64(c.Period) / ms
	cl := call{n: n}
	switch c.Algorithm {
	case algo.FixedWindow:
		args[1] = fixedLua.Hash()
		args = append(args, pms, n)
	case algo.SlidingWindow, algo.SlidingLog:
		args[1] = countLua.Hash()
		kind := "w"
		if c.Algorithm == algo.SlidingLog {
			kind = "l"
		}
		if n > c.Limit {
			args[4], cl.never = "1", true // denied and counted nowhere
		}
		args = append(args, kind, pms, c.Limit, min(n, c.Limit+1))
	case algo.GCRA, algo.TokenBucket, algo.LeakyBucket:
		if c.Limit <= 0 || capacity(c) <= 0 {
			return call{local: true, never: true}
		}
		args[1] = drainLua.Hash()
		args, cl.never = drainArgs(c, n, args)
	default:
		panic(unscreened(c.Algorithm))
	}
	cl.cmd = redis.NewCmd(ctx, args...)
	cl.cmd.SetFirstKeyPos(3)
	return cl
}

// drainArgs appends the bucket script's arguments to args: N*T and
// Capacity*T, worked out here exactly. Hits that ask for more than the
// bucket holds go as op 2 (look, move a changed Limit's backlog, deny) and
// never is true.
func drainArgs(c *algo.Check, n int64, args []any) ([]any, bool) {
	capc := capacity(c)
	need, ok := times(n, int64(c.Period), c.Limit)
	full, _ := times(capc, int64(c.Period), c.Limit)
	never := !ok || n > capc
	if never {
		need = span{}
		if args[4] == "0" {
			args[4] = "2"
		}
	}
	return append(args, c.Limit, need.ns, need.frac, full.ns, full.frac), never
}

// decision turns a script's reply into c's decision.
func (s *Store) decision(c *algo.Check, cl *call, now int64) algo.Decision {
	if cl.local {
		if cl.never {
			return algo.Decision{RetryAfter: algo.Never}
		}
		return algo.Decision{}
	}
	v, _ := cl.cmd.Val().([]any)
	r := reply(v)
	switch c.Algorithm {
	case algo.FixedWindow:
		return fixedDecision(c, r)
	case algo.SlidingWindow, algo.SlidingLog:
		return countDecision(c, cl, r)
	case algo.GCRA, algo.TokenBucket, algo.LeakyBucket:
		d := drainDecision(c, cl, r)
		if c.Algorithm != algo.LeakyBucket {
			d.Delay = 0
		}
		return d
	}
	panic(unscreened(c.Algorithm))
}

// unscreened is the panic of a switch over the algorithms that meets one
// [supported] should have refused: an impossible state.
func unscreened(a algo.Algorithm) string {
	return fmt.Sprintf("redisstore: algorithm %v got past supported", a)
}

func fixedDecision(c *algo.Check, r reply) algo.Decision {
	now, b, count := r.now(), r.int(2), r.int(3)
	var d algo.Decision
	end := (b + 1) * int64(c.Period)
	if c.Op == algo.OpPeek {
		if r.int(4) == 1 {
			d.Count, d.ResetAfter = count, time.Duration(end-now)
		}
		d.Allowed = d.Count < c.Limit
		d.Remaining = max(0, c.Limit-d.Count)
		switch {
		case d.Allowed:
		case c.Limit < 1:
			d.RetryAfter = algo.Never
		default:
			d.RetryAfter = d.ResetAfter
		}
		return d
	}
	d = algo.Decision{Count: count, Allowed: count <= c.Limit, Remaining: max(0, c.Limit-count)}
	d.ResetAfter = time.Duration(end - now)
	switch {
	case d.Allowed:
	case c.N > c.Limit:
		d.RetryAfter = algo.Never
	default:
		d.RetryAfter = d.ResetAfter
	}
	return d
}

func countDecision(c *algo.Check, cl *call, r reply) algo.Decision {
	now, alive, newest, retry := r.now(), r.int(2), r.int(3), r.int(4)
	g := gridOf(c)
	d := algo.Decision{Count: alive, Remaining: max(0, c.Limit-alive)}
	if alive > 0 {
		d.ResetAfter = time.Duration(g.death(newest) - now)
	}
	switch {
	case cl.never:
		d.RetryAfter = algo.Never
		return d
	case alive > c.Limit-cl.n:
		d.RetryAfter = time.Duration(g.death(retry) - now)
		return d
	}
	d.Allowed = true
	if c.Op == algo.OpPeek {
		return d
	}
	d.Count = r.int(6)
	d.Remaining = max(0, c.Limit-d.Count)
	d.ResetAfter = time.Duration(g.death(newest) - now)
	return d
}

func drainDecision(c *algo.Check, cl *call, r reply) algo.Decision {
	back := span{r.int(2), uint64(r.int(3))}
	need := span{r.int(4), uint64(r.int(5))}
	period, capc := int64(c.Period), capacity(c)
	d := algo.Decision{Count: hits(back, period, c.Limit), ResetAfter: back.ceil()}
	d.Remaining = max(0, capc-d.Count)
	if cl.never {
		d.RetryAfter = algo.Never
		return d
	}
	if r.int(6) != 1 {
		full, _ := times(capc, period, c.Limit)
		d.RetryAfter = sub(need, full, c.Limit).ceil()
		return d
	}
	d.Allowed = true
	d.Delay = back.ceil()
	if c.Op == algo.OpPeek {
		return d
	}
	d.Count = hits(need, period, c.Limit)
	d.Remaining = max(0, capc-d.Count)
	d.ResetAfter = need.ceil()
	return d
}
