package redisstore

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/actorlimit/actorlimit/algo"
)

// windowGrace is how long a window's key outlives the window
// (WithWindowKeys): the scripts' grace with the caller's time, whose clock
// need not run with Redis's.
const windowGrace = 60_000 // ms

// windowed reports whether c is decided by a key per window.
func (s *Store) windowed(c *algo.Check) bool {
	return s.cfg.windowKeys && c.Algorithm == algo.FixedWindow
}

// planWindow returns the call of c, a fixed window's check kept as a key
// per window (WithWindowKeys), and adds its commands to the round's
// pipeline: a hit's INCRBY and PEXPIRE NX, a peek's GET, a Reset's DEL of
// the window of now. Their arguments are the round's buffers (no
// allocation but the key and the commands).
func (s *Store) planWindow(ctx context.Context, r *round, now int64, c *algo.Check) call {
	period := int64(c.Period)
	w := algo.FloorDiv(now, period)
	k := r.keyArg(s.windowKey(r, c, w))
	start := len(r.args)
	switch c.Op {
	case algo.OpReset:
		r.args = append(r.args, "del", k)
		cl := call{local: true, cmd: redis.NewCmd(ctx, r.args[start:len(r.args):len(r.args)]...)}
		r.pipe = append(r.pipe, cl.cmd)
		return cl
	case algo.OpPeek:
		r.args = append(r.args, "get", k)
		wc := r.newWin()
		wc.get = *redis.NewStringCmd(ctx, r.args[start:len(r.args):len(r.args)]...)
		r.pipe = append(r.pipe, &wc.get)
		return call{win: true, window: w, n: 1, get: &wc.get}
	}
	// The TTL: to the window's end, in whole ms from the ms of now, and
	// the grace, as fixedScript sets it.
	ttl := max(1, (w+1)*(period/ms)-floorDiv(now, ms)) + windowGrace
	r.args = append(r.args, "incrby", k, c.N)
	mid := len(r.args)
	r.args = append(r.args, "pexpire", k, r.textArg(ttl), "nx")
	wc := r.newWin()
	wc.incr = *redis.NewIntCmd(ctx, r.args[start:mid:mid]...)
	wc.expire = *redis.NewBoolCmd(ctx, r.args[mid:len(r.args):len(r.args)]...)
	r.pipe = append(r.pipe, &wc.incr, &wc.expire)
	return call{win: true, window: w, n: c.N, incr: &wc.incr, expire: &wc.expire}
}

// winCmds are the commands of one window call, held by the round (no
// allocation a call once its buffer has grown). A pointer to them stays
// valid when r.wins grows (it then points into the old array, which
// nothing writes again); r.wins is reused only once the round's commands
// are done (see release).
type winCmds struct {
	incr   redis.IntCmd
	expire redis.BoolCmd
	get    redis.StringCmd
}

// newWin returns the next of the round's window commands.
func (r *round) newWin() *winCmds {
	if len(r.wins) < cap(r.wins) {
		r.wins = r.wins[:len(r.wins)+1]
	} else {
		r.wins = append(r.wins, winCmds{})
	}
	return &r.wins[len(r.wins)-1]
}

// textArg returns v as a command's argument, its decimal text, without an
// allocation once the round's buffers have grown: boxing an int64 past 255
// allocates. The text is in r.text, which is reused, as r.keyText, only
// once the round's commands are done.
func (r *round) textArg(v int64) any {
	start := len(r.text)
	r.text = strconv.AppendInt(r.text, v, 10)
	b := r.text[start:]
	return r.keyArg(unsafe.String(unsafe.SliceData(b), len(b)))
}

// isOverflow reports whether err is INCRBY's refusal of a count past
// MaxInt64.
func isOverflow(err error) bool {
	return err != nil && strings.Contains(err.Error(), "would overflow")
}

// windowFailure returns the error of a window call's check, nil if it
// was decided: INCRBY's overflow is a saturated count, and a peek of no
// key a count of 0.
func (cl *call) windowFailure() error {
	if cl.get != nil {
		err := cl.get.Err()
		if err == redis.Nil {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := strconv.ParseInt(cl.get.Val(), 10, 64); err != nil {
			return fmt.Errorf("redisstore: the window's key holds %q, not a count", cl.get.Val())
		}
		return nil
	}
	if err := cl.incr.Err(); err != nil && !isOverflow(err) {
		return err // only a key whose INCRBY worked, or overflowed, is saturated
	}
	if err := cl.expire.Err(); err != nil {
		return fmt.Errorf("redisstore: PEXPIRE NX of a window's key (WithWindowKeys needs Redis 7.0 or later): %w", err)
	}
	return nil
}

// saturate marks saturated each window call of the round whose INCRBY
// overflowed, and each later one of the round on its key (a hit's count or
// a peek's would otherwise be read below MaxInt64, where the script had
// written it), until a Reset of the key; then it writes MaxInt64 into the
// keys still saturated at the round's end, in one more round trip, so that
// the hits after the round see it too. Only a count above MaxInt64-N
// overflows, so no hit is forgotten. XX and KEEPTTL leave a key that has
// gone meanwhile gone, and its TTL as it was. Overflows are rare (a
// client's hostile N): the round's usual path allocates nothing here.
func (s *Store) saturate(ctx context.Context, r *round) error {
	var sat map[string]bool // the keys saturated so far in the round's order
	for i := range r.calls {
		cl := &r.calls[i]
		switch {
		case cl.incr != nil && isOverflow(cl.incr.Err()):
			if sat == nil {
				sat = map[string]bool{}
			}
			sat[argString(cl.incr.Args()[1])], cl.sat = true, true
		case sat == nil:
		case cl.incr != nil:
			cl.sat = sat[argString(cl.incr.Args()[1])]
		case cl.get != nil:
			cl.sat = sat[argString(cl.get.Args()[1])]
		case cl.cmd != nil && isDel(cl.cmd):
			delete(sat, argString(cl.cmd.Args()[1]))
		}
	}
	if len(sat) == 0 {
		return nil
	}
	cmds := make([]redis.Cmder, 0, len(sat))
	for k := range sat {
		cmds = append(cmds, redis.NewStatusCmd(ctx, "set", k, strconv.FormatInt(math.MaxInt64, 10), "xx", "keepttl"))
	}
	return s.exec(ctx, r, cmds)
}

// windowDecision is c's decision from its window call's reply, at now.
func windowDecision(c *algo.Check, cl *call, now int64) algo.Decision {
	left := (cl.window+1)*int64(c.Period) - now
	if cl.get != nil && cl.sat {
		return fixedDecision(c, counted{left: left, count: math.MaxInt64, current: true})
	}
	if cl.get != nil {
		n, err := strconv.ParseInt(cl.get.Val(), 10, 64)
		if cl.get.Err() != nil || err != nil {
			return fixedDecision(c, counted{}) // no key: nothing counted in the window
		}
		return fixedDecision(c, counted{left: left, count: n, current: true})
	}
	if cl.sat {
		// The count stays at MaxInt64, and the hits past it are denied
		// whatever the limit, as the table denies them.
		d := fixedDecision(c, counted{left: left, count: math.MaxInt64, current: true})
		if d.Allowed {
			d.Allowed, d.RetryAfter = false, time.Duration(left)
		}
		return d
	}
	return fixedDecision(c, counted{left: left, count: cl.incr.Val(), current: true})
}
