package cluster

import (
	"time"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

func checkToWire(c *algo.Check) *clusterpb.Check {
	return &clusterpb.Check{
		Op:        uint32(c.Op),
		Algorithm: uint32(c.Algorithm),
		Id:        c.ID,
		PeriodNs:  int64(c.Period),
		Limit:     c.Limit,
		Burst:     c.Burst,
		N:         c.N,
	}
}

// checkFromWire converts a check from another member; it is validated again,
// since a message from the network is input like any other.
func checkFromWire(w *clusterpb.Check) (algo.Check, error) {
	c := algo.Check{
		Op:        algo.Op(w.GetOp()),
		Algorithm: algo.Algorithm(w.GetAlgorithm()),
		ID:        w.GetId(),
		Period:    time.Duration(w.GetPeriodNs()),
		Limit:     w.GetLimit(),
		Burst:     w.GetBurst(),
		N:         w.GetN(),
	}
	if w.GetOp() > uint32(algo.OpReset) {
		return c, algo.ErrInvalid
	}
	if c.ID == "" || len(c.ID) > actorlimit.MaxIDLength || c.N <= 0 {
		return c, algo.ErrInvalid
	}
	return c, algo.Validate(c.Algorithm, c.Limit, c.Period, c.Burst)
}

func decisionToWire(d algo.Decision) *clusterpb.Decision {
	return &clusterpb.Decision{
		Allowed:      d.Allowed,
		Count:        d.Count,
		Remaining:    d.Remaining,
		RetryAfterNs: int64(d.RetryAfter),
		ResetAfterNs: int64(d.ResetAfter),
		DelayNs:      int64(d.Delay),
	}
}

func decisionFromWire(w *clusterpb.Decision) algo.Decision {
	return algo.Decision{
		Allowed:    w.GetAllowed(),
		Count:      w.GetCount(),
		Remaining:  w.GetRemaining(),
		RetryAfter: time.Duration(w.GetRetryAfterNs()),
		ResetAfter: time.Duration(w.GetResetAfterNs()),
		Delay:      time.Duration(w.GetDelayNs()),
	}
}
