package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlimit/actorlimit/algo"
)

// send decides checks in one round trip: a lone command goes as itself, more
// as one pipeline. More round trips come only for the scripts that Redis no
// longer had (NOSCRIPT), which changed nothing and are loaded and sent again
// in order. It returns an error when the round trip failed; a check that
// Redis answered with an error of its own (see [isCheckError]) is left to
// the caller in r.failed, and out[i] is not written for it.
func (s *Store) send(ctx context.Context, r *round, now int64, checks []algo.Check, out []algo.Decision) error {
	ctx = r.withDeadline(ctx, time.Now().Add(s.cfg.timeout))
	r.calls = r.calls[:0]
	r.pipe = r.pipe[:0]
	r.runs = r.runs[:0]
	r.keys, r.keyText, r.runArgs = r.keys[:0], r.keyText[:0], r.runArgs[:0]
	r.args, r.params = r.args[:0], r.params[:0]
	for i := range checks {
		c := &checks[i]
		if s.denied != nil && c.Op == algo.OpHit {
			if d, ok := s.denied.answer(now, c); ok {
				s.stats.cached.Add(1)
				r.calls = append(r.calls, call{local: true, cached: true, dec: d})
				continue
			}
		}
		if s.windowed(c) {
			s.endRun(ctx, r, now)
			r.calls = append(r.calls, s.planWindow(ctx, r, now, c))
			continue
		}
		if sc := runScript(c); sc != nil {
			r.calls = append(r.calls, s.planRun(ctx, r, now, s.roundKey(r, c), c, sc))
			if !s.batched {
				s.endRun(ctx, r, now) // a run of one: its key's slot alone
			}
			continue
		}
		s.endRun(ctx, r, now)
		r.calls = append(r.calls, s.plan(ctx, now, s.roundKey(r, c), c))
		if cmd := r.calls[i].cmd; cmd != nil {
			r.pipe = append(r.pipe, cmd)
		}
	}
	s.endRun(ctx, r, now)
	if err := s.exec(ctx, r, r.pipe); err != nil {
		return err
	}
	if err := s.reload(ctx, r); err != nil {
		return err
	}
	if s.cfg.windowKeys {
		if err := s.saturate(ctx, r); err != nil {
			return err
		}
	}
	r.readRuns()
	r.failed = r.failed[:0]
	for i := range checks {
		if r.calls[i].failure(r) != nil {
			r.failed = append(r.failed, i)
			continue
		}
		cl := &r.calls[i]
		out[i] = s.decision(r, &checks[i], cl, now)
		if s.denied != nil && !cl.cached {
			s.denied.remember(now, &checks[i], &out[i])
		}
	}
	return nil
}

// exec sends cmds in one round trip: a lone command as itself, more as one
// pipeline. It returns an error when the round trip failed, and not when
// each command that failed failed alone: NOSCRIPT (see reload) or an error
// of its check's own.
func (s *Store) exec(ctx context.Context, r *round, cmds []redis.Cmder) error {
	if len(cmds) == 0 {
		return nil
	}
	if s.honors {
		return s.roundTrip(ctx, cmds) // no closure to allocate: the common case
	}
	return s.bounded(ctx, r, func(ctx context.Context) error { return s.roundTrip(ctx, cmds) })
}

// roundTrip sends cmds and returns the error of the round trip, not of a
// command that failed alone (see failedAlone).
func (s *Store) roundTrip(ctx context.Context, cmds []redis.Cmder) error {
	var err error
	if s.single != nil {
		if oc := s.takeOwn(); oc != nil {
			err = s.ownRoundTrip(ctx, oc, cmds)
			s.putOwn(oc, err, cmds)
			if err != nil && !failedAlone(cmds) {
				return err
			}
			return nil
		}
	}
	if len(cmds) == 1 {
		err = s.client.Process(ctx, cmds[0])
	} else {
		p := s.client.Pipeline()
		_ = p.BatchProcess(ctx, cmds...)
		_, err = p.Exec(ctx)
	}
	if err != nil && !failedAlone(cmds) {
		return err
	}
	return nil
}

// failedAlone reports whether some command failed and every failed one
// failed alone: for NOSCRIPT, which changed nothing, or with an error of
// its check's own.
func failedAlone(cmds []redis.Cmder) bool {
	failed := false
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			if !isNoScript(err) && !isCheckError(err) {
				return false
			}
			failed = true
		}
	}
	return failed
}

func isNoScript(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") }

// serverWide are the prefixes of the error replies that speak for Redis as
// a whole, not for one key: it is loading, busy with a script, a replica
// or a cluster without a quorum, or refuses the connection. They fail the
// round trip, as a network error does.
var serverWide = []string{"LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY",
	"NOREPLICAS", "NOAUTH", "WRONGPASS", "MOVED", "ASK", "ERR max number of clients"}

// isCheckError reports whether err is an error reply of one command's own:
// a key holding another type (WRONGTYPE), a state the script cannot read
// or another script error, OOM. Redis answered the round trip, and the
// other commands of the pipeline were run.
func isCheckError(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) || isNoScript(err) {
		return false
	}
	for _, p := range serverWide {
		if strings.HasPrefix(re.Error(), p) {
			return false
		}
	}
	return true
}

// reload loads again the scripts of the commands that failed for NOSCRIPT
// and sends those commands again, in their order, in one pipeline, with
// each DEL (a Reset) of a key that one of them, ahead of it, touches: a
// Reset that ran before the hits ahead of it were sent again would
// otherwise leave them counted. Running such a DEL again is what it meant:
// the key's state is gone at that point of the order, and no command on
// the key ran after it (a key's commands all use one script, which Redis
// either had or lacked), so nothing else is undone.
func (s *Store) reload(ctx context.Context, r *round) error {
	var again []redis.Cmder
	var failed map[string]bool // the keys of the commands that got NOSCRIPT so far
	for _, cmd := range r.pipe {
		if isNoScript(cmd.Err()) {
			if failed == nil {
				failed = map[string]bool{}
			}
			args := cmd.Args()
			if n, ok := args[2].(int); ok {
				for _, k := range args[3 : 3+n] {
					failed[argString(k)] = true
				}
			}
			again = append(again, cmd)
		} else if failed != nil && isDel(cmd) && failed[argString(cmd.Args()[1])] {
			again = append(again, cmd)
		}
	}
	if len(again) == 0 {
		return nil
	}
	s.stats.reloads.Add(1)
	for _, sc := range []*redis.Script{fixedLua, countLua, drainLua} {
		if !slices.ContainsFunc(again, func(c redis.Cmder) bool { return c.Args()[1] == sc.Hash() }) {
			continue // not one of those Redis lacked
		}
		if err := s.bounded(ctx, r, func(ctx context.Context) error { return sc.Load(ctx, s.client).Err() }); err != nil {
			return err
		}
	}
	fresh := make(map[redis.Cmder]redis.Cmder, len(again))
	err := s.bounded(ctx, r, func(ctx context.Context) error {
		p := s.client.Pipeline()
		for _, c := range again {
			var f redis.Cmder = redis.NewCmd(ctx, c.Args()...)
			if _, ok := c.(*redis.IntSliceCmd); ok {
				f = redis.NewIntSliceCmd(ctx, c.Args()...) // a lone fixed-window hit
			}
			if !isDel(c) {
				f.SetFirstKeyPos(3)
			}
			_ = p.Process(ctx, f)
			fresh[c] = f
		}
		if _, err := p.Exec(ctx); err != nil && !failedAlone(p2cmds(fresh)) {
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := range r.calls {
		if c := r.calls[i].cmd; c != nil {
			if f, ok := fresh[c]; ok {
				r.calls[i].cmd = f.(*redis.Cmd)
			}
		}
	}
	for i := range r.runs {
		rn := &r.runs[i]
		if rn.cmd != nil {
			if f, ok := fresh[rn.cmd]; ok {
				rn.cmd = f.(*redis.Cmd)
			}
		}
		if rn.hits != nil {
			if f, ok := fresh[rn.hits]; ok {
				rn.hits = f.(*redis.IntSliceCmd)
			}
		}
	}
	return nil
}

// isDel reports whether cmd is a Reset's DEL, as plan makes it: its name
// compared as written, not through Cmd.Name, which lowers its case.
func isDel(cmd redis.Cmder) bool {
	name, _ := cmd.Args()[0].(string)
	return name == "del"
}

func p2cmds(m map[redis.Cmder]redis.Cmder) []redis.Cmder {
	out := make([]redis.Cmder, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	return out
}

// plan returns c's command, built whole here (the arguments as numbers,
// which go-redis writes without a string each), or decides c here when
// Redis has nothing to say (a bucket whose limit is 0).
func (s *Store) plan(ctx context.Context, now int64, k string, c *algo.Check) call {
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
		// A bucket of limit 0 allows nothing (the others go in runs).
		return call{local: true, never: true}
	default: // a fixed window's check goes in a run (runScript)
		panic(unscreened(c.Algorithm))
	}
	cl.cmd = redis.NewCmd(ctx, args...)
	cl.cmd.SetFirstKeyPos(3)
	return cl
}

// reply returns the reply of the call's own script call.
func (cl *call) reply() reply {
	v, _ := cl.cmd.Val().([]any)
	return reply(v)
}

// appendDrain appends c's 48 bytes of drainScript's ARGV[1] to b, for c's
// op (0 hit, 1 peek): the op to send, the Limit, N*T and Capacity*T, worked
// out here exactly, as six little-endian doubles (each an integer below
// 2^53). Hits that ask for more than the bucket holds go as op 2 (look,
// move a changed Limit's backlog, deny) and never is true.
func appendDrain(b []byte, c *algo.Check, n int64, op int) (_ []byte, never bool) {
	capc := capacity(c)
	need, ok := times(n, int64(c.Period), c.Limit)
	full, _ := times(capc, int64(c.Period), c.Limit)
	never = !ok || n > capc
	if never {
		need = span{}
		if op == 0 {
			op = 2
		}
	}
	for _, v := range [6]float64{float64(op), float64(c.Limit), float64(need.ns), float64(need.frac), float64(full.ns), float64(full.frac)} {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b, never
}

// decision turns a script's reply into c's decision.
func (s *Store) decision(rd *round, c *algo.Check, cl *call, now int64) algo.Decision {
	if cl.cached {
		return cl.dec
	}
	if cl.win {
		return windowDecision(c, cl, now)
	}
	if cl.local {
		if cl.never {
			return algo.Decision{RetryAfter: algo.Never}
		}
		return algo.Decision{}
	}
	switch c.Algorithm {
	case algo.FixedWindow:
		return fixedDecision(c, rd.runs[cl.run-1].fixed(cl.pos, int64(c.Period)))
	case algo.SlidingWindow, algo.SlidingLog:
		return countDecision(c, cl, cl.reply())
	case algo.GCRA, algo.TokenBucket, algo.LeakyBucket:
		d := drainDecision(c, cl, rd.runs[cl.run-1].drained(cl.pos))
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

func fixedDecision(c *algo.Check, w counted) algo.Decision {
	count := w.count
	var d algo.Decision
	if c.Op == algo.OpPeek {
		if w.current {
			d.Count, d.ResetAfter = count, time.Duration(w.left)
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
	d.ResetAfter = time.Duration(w.left)
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

// drained is what a bucket script said of one check: the backlog before
// it, after the clamp and the move to a changed Limit.
type drained struct{ back span }

// drainDecision turns the backlog the script read into c's decision:
// the backlog a hit would leave is that plus N*T, and it was allowed (and
// written) when that is at most Capacity*T, as the script decided.
func drainDecision(c *algo.Check, cl *call, r drained) algo.Decision {
	back := r.back
	period, capc := int64(c.Period), capacity(c)
	d := algo.Decision{Count: hits(back, period, c.Limit), ResetAfter: back.ceil()}
	d.Remaining = max(0, capc-d.Count)
	if cl.never {
		d.RetryAfter = algo.Never
		return d
	}
	full, _ := times(capc, period, c.Limit)
	need, _ := times(cl.n, period, c.Limit)
	need = add(back, need, c.Limit)
	if less(full, need) {
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
