package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/actorlimit/actorlimit/algo"
)

// run is a run of consecutive checks of one batch that one script decides
// (buckets: drainScript; fixed windows: fixedScript), sent as one call of
// it: keys and parameters are gathered as the checks are planned, and cmd
// is made when the run ends.
type run struct {
	script *redis.Script // drainLua or fixedLua: the run's kind
	keys   []any         // the run's keys, in order (each a *string: see keyArg)
	args   []any         // fixedScript's values for each key
	params []byte        // drainScript's ARGV[1]: 48 bytes for each key
	cmd    *redis.Cmd
	// hits is the call of a fixed window run of one hit (fixedScript's
	// lone call), made in place of cmd: its reply, all numbers, is read
	// into a []int64, without boxing each.
	hits *redis.IntSliceCmd

	// Read from the reply by readRuns.
	now  int64   // fixedScript: the time it decided at, Unix ns
	vals []any   // three values per key (fixedScript), two (drainScript)
	lone int64   // drainScript, vals nil: the one check's backlog, whole ns
	errs []error // each key's error reply, nil where it had none
	bad  error   // the reply could not be read: every key fails with it
}

// runScript returns the script that decides c in a run: drainScript for a
// bucket check and fixedScript for a fixed window's, which Redis decides;
// nil for any other check (another algorithm, a Reset, a bucket of limit
// 0, which is decided here).
func runScript(c *algo.Check) *redis.Script {
	if c.Op == algo.OpReset {
		return nil
	}
	switch c.Algorithm {
	case algo.GCRA, algo.TokenBucket, algo.LeakyBucket:
		if c.Limit > 0 && capacity(c) > 0 {
			return drainLua
		}
	case algo.FixedWindow:
		return fixedLua
	}
	return nil
}

// planRun adds c, a check that sc decides, to the round's open run,
// ending it first if it is another script's (or starting one if none is
// open), and returns its call.
func (s *Store) planRun(ctx context.Context, r *round, now int64, k string, c *algo.Check, sc *redis.Script) call {
	if len(r.runs) > 0 && r.runs[len(r.runs)-1].open() && r.runs[len(r.runs)-1].script != sc {
		s.endRun(ctx, r, now)
	}
	if len(r.runs) == 0 || !r.runs[len(r.runs)-1].open() {
		r.runs = append(r.runs, run{script: sc})
	}
	rn := &r.runs[len(r.runs)-1]
	op, n := 0, c.N
	if c.Op == algo.OpPeek {
		op, n = 1, 1
	}
	never := false
	if sc == fixedLua {
		// The run's values are the tail of the round's buffer, as its
		// keys and parameters below.
		start := len(r.runArgs) - len(rn.args)
		r.runArgs = append(r.runArgs, op, r.periodArg(int64(c.Period)/ms), n)
		rn.args = r.runArgs[start:]
	} else {
		// The run's parameters are the tail of the round's buffer: runs
		// follow one another, so an open run's are always at its end (and
		// a closed run's stay where they are if the buffer grows).
		start := len(r.params) - len(rn.params)
		r.params, never = appendDrain(r.params, c, n, op)
		rn.params = r.params[start:]
	}
	start := len(r.keys) - len(rn.keys) // the open run's keys are the tail, as its parameters
	r.keys = append(r.keys, r.keyArg(k))
	rn.keys = r.keys[start:]
	return call{n: n, never: never, run: len(r.runs), pos: len(rn.keys) - 1}
}

// endRun ends the round's open run, if any: its script call is made and
// goes next in the pipeline, so that the checks keep their order.
func (s *Store) endRun(ctx context.Context, r *round, now int64) {
	if len(r.runs) == 0 || !r.runs[len(r.runs)-1].open() {
		return
	}
	rn := &r.runs[len(r.runs)-1]
	start := len(r.args)
	args := r.args
	if rn.script == fixedLua && len(rn.keys) == 1 && rn.args[0] == 0 {
		// A lone hit: the Period and N (see fixedScript).
		args = append(args, "evalsha", fixedSHA, 1, rn.keys[0], rn.args[1], rn.args[2])
		if s.cfg.callerTime {
			m := floorDiv(now, ms)
			args = append(args, m, now-m*ms)
		}
		r.args = args
		rn.hits = redis.NewIntSliceCmd(ctx, args[start:len(args):len(args)]...)
		rn.hits.SetFirstKeyPos(3)
		r.pipe = append(r.pipe, rn.hits)
		return
	} else if rn.script == fixedLua {
		args = append(args, "evalsha", fixedSHA, len(rn.keys))
		args = append(args, rn.keys...)
		args = append(args, "1", 0, 0)
		if s.cfg.callerTime {
			m := floorDiv(now, ms)
			args[len(args)-3], args[len(args)-2], args[len(args)-1] = "0", m, now-m*ms
		}
		args = append(args, rn.args...)
	} else {
		args = append(args, "evalsha", drainSHA, len(rn.keys))
		args = append(args, rn.keys...)
		args = append(args, rn.params)
		if s.cfg.callerTime {
			m := floorDiv(now, ms)
			args = append(args, m, now-m*ms)
		}
	}
	r.args = args
	args = args[start:len(args):len(args)] // the command's own; a later append copies
	rn.cmd = redis.NewCmd(ctx, args...)
	rn.cmd.SetFirstKeyPos(3)
	r.pipe = append(r.pipe, rn.cmd)
}

// readRuns reads each run's reply.
func (r *round) readRuns() {
	for i := range r.runs {
		r.runs[i].read()
	}
}

func (rn *run) read() {
	if rn.hits != nil {
		// c and the ns to the window's end, or c, whole ms and r.
		if rn.bad = rn.hits.Err(); rn.bad == nil && len(rn.hits.Val()) != 2 && len(rn.hits.Val()) != 3 {
			rn.bad = fmt.Errorf("redisstore: the fixed window script's reply to a lone hit has %d values, not 2 or 3", len(rn.hits.Val()))
		}
		return
	}
	rn.bad = rn.cmd.Err()
	if rn.bad != nil {
		return
	}
	v, _ := rn.cmd.Val().([]any)
	if b, ok := rn.cmd.Val().(int64); ok && rn.script == drainLua && len(rn.keys) == 1 {
		rn.lone, rn.vals = b, nil // a lone check's backlog of whole ns
		return
	}
	per := 2 // drainScript: a key's backlog, ns and fraction
	if rn.script == fixedLua {
		per = 3
		if len(v) < 2 {
			rn.bad = fmt.Errorf("redisstore: the fixed window script's reply has %d values for %d keys", len(v), len(rn.keys))
			return
		}
		rn.now, v = reply(v).now(), v[2:]
	}
	if len(v) < per*len(rn.keys) || (len(v)-per*len(rn.keys))%2 != 0 {
		rn.bad = fmt.Errorf("redisstore: the %s script's reply has %d values for %d keys", rn.kind(), len(v), len(rn.keys))
		return
	}
	rn.vals = v[:per*len(rn.keys)]
	errs := v[per*len(rn.keys):]
	for j := 0; j+1 < len(errs); j += 2 {
		pos, ok := errs[j].(int64)
		msg, _ := errs[j+1].(string)
		if !ok || pos < 1 || pos > int64(len(rn.keys)) {
			continue
		}
		if rn.errs == nil {
			rn.errs = make([]error, len(rn.keys))
		}
		rn.errs[pos-1] = replyError(msg)
	}
}

// counted is what fixedScript said of one check: the ns from the time it
// decided at to the end of the window, its count, and whether it is the
// current window or a later one.
type counted struct {
	left, count int64
	current     bool
}

// fixed returns what fixedScript said of the run's check at pos, whose
// Period is period ns.
func (rn *run) fixed(pos int, period int64) counted {
	if rn.hits != nil {
		v := rn.hits.Val()
		left := v[1]
		if len(v) == 3 {
			left = left*ms - v[2] // whole ms to the end, and r: at most the Period
		}
		return counted{left: left, count: v[0], current: true}
	}
	r := reply(rn.vals[3*pos : 3*pos+3])
	return counted{left: (r.int(0)+1)*period - rn.now, count: r.int(1), current: r.int(2) == 1}
}

// drained returns what the script said of the run's check at pos.
func (rn *run) drained(pos int) drained {
	if rn.vals == nil {
		return drained{back: span{ns: rn.lone}}
	}
	r := reply(rn.vals[2*pos : 2*pos+2])
	return drained{back: span{r.int(0), uint64(r.int(1))}}
}

// open reports whether the run is still gathering checks: its call is
// not made yet.
func (rn *run) open() bool { return rn.cmd == nil && rn.hits == nil }

func (rn *run) kind() string {
	if rn.script == fixedLua {
		return "fixed window"
	}
	return "bucket"
}

// failure returns the error of the call's check: its script call's, or,
// in a run, the run's or the check's own; nil if it was decided.
func (cl *call) failure(r *round) error {
	if cl.win {
		return cl.windowFailure()
	}
	if cl.run > 0 {
		rn := &r.runs[cl.run-1]
		if rn.bad != nil {
			return rn.bad
		}
		if rn.errs != nil && rn.errs[cl.pos] != nil {
			return rn.errs[cl.pos]
		}
		return nil
	}
	if cl.cmd != nil {
		return cl.cmd.Err()
	}
	return nil
}

// replyError is the error reply Redis gave for one key of a run, which the
// script caught: it is a redis.Error, as the reply of a script call of the
// key's own would be.
type replyError string

func (e replyError) Error() string { return string(e) }

// RedisError marks e as an error reply of Redis's (redis.Error).
func (replyError) RedisError() {}

var _ redis.Error = replyError("")
