package actorlimit

import (
	"github.com/actorlimit/actorlimit/actor"
	"github.com/actorlimit/actorlimit/algo"
)

// HitRequest asks the limiter, from another actor, to count N hits for ID
// under Policy. Request it on [Limiter.PID]; the limiter answers the sender
// with a [*HitResponse]. N 0 means 1.
type HitRequest struct {
	ID     string
	Policy Policy
	N      int64
}

// PeekRequest asks the limiter, from another actor, for ID's state under
// Policy without counting anything; the answer is a [*HitResponse].
type PeekRequest struct {
	ID     string
	Policy Policy
}

// ResetRequest asks the limiter, from another actor, to forget ID's state
// under Policy; the answer is a [*ResetResponse].
type ResetRequest struct {
	ID     string
	Policy Policy
}

// HitResponse answers a [HitRequest] or a [PeekRequest].
type HitResponse struct {
	ID     string
	Result Result
	// Err is non-nil for bad input or a panic in the limiter.
	Err error
}

// ResetResponse answers a [ResetRequest].
type ResetResponse struct {
	ID  string
	Err error
}

// protocol decodes the request messages above for the limiter actor.
type protocol struct{}

var _ actor.Protocol = protocol{}

func (protocol) Decode(msg any) (algo.Check, bool, error) {
	var chk algo.Check
	var err error
	switch m := msg.(type) {
	case *HitRequest:
		n := m.N
		if n == 0 {
			n = 1
		}
		chk, err = newCheck(algo.OpHit, m.ID, m.Policy, n)
	case *PeekRequest:
		chk, err = newCheck(algo.OpPeek, m.ID, m.Policy, 1)
	case *ResetRequest:
		chk, err = newCheck(algo.OpReset, m.ID, m.Policy, 1)
	default:
		return algo.Check{}, false, nil
	}
	return chk, true, err
}

func (protocol) Reply(msg any, d algo.Decision, err error) any {
	switch m := msg.(type) {
	case *HitRequest:
		return &HitResponse{ID: m.ID, Result: resultOrZero(m.Policy, d, err), Err: err}
	case *PeekRequest:
		return &HitResponse{ID: m.ID, Result: resultOrZero(m.Policy, d, err), Err: err}
	case *ResetRequest:
		return &ResetResponse{ID: m.ID, Err: err}
	}
	return nil
}

func resultOrZero(p Policy, d algo.Decision, err error) Result {
	if err != nil {
		return Result{}
	}
	return resultOf(p, d)
}
