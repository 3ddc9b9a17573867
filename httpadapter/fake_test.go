package httpadapter_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
)

var _ httpadapter.Limiter = (*actorlimit.Limiter)(nil)

// fakeLimiter counts hits per ID in one window that never ends. Every
// result has ResetAfter Reset and, when denied, RetryAfter Retry.
type fakeLimiter struct {
	mu     sync.Mutex
	counts map[string]int64
	calls  int
	ids    []string // every ID seen, in order
	err    error    // returned by every call when set
	Reset  time.Duration
	Retry  map[string]time.Duration // by rule-name prefix of the ID; default Reset
	Delay  time.Duration            // of every allowed result
	// Refuse lists rule-name prefixes of IDs whose hits it refuses as bad
	// input, failing the whole call and counting nothing, as
	// *actorlimit.Limiter does.
	Refuse []string
	// RefuseErr, when set, is the error of a call refused for hits[i];
	// default: one wrapping actorlimit.ErrInvalidArgument.
	RefuseErr func(i int) error
}

func newFake() *fakeLimiter {
	return &fakeLimiter{counts: map[string]int64{}, Reset: 30 * time.Second}
}

func (f *fakeLimiter) HitMany(_ context.Context, hits []actorlimit.HitRequest, results []actorlimit.Result) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return f.err
	}
	for i, h := range hits {
		for _, p := range f.Refuse {
			if strings.HasPrefix(h.ID, p) {
				if f.RefuseErr != nil {
					return f.RefuseErr(i)
				}
				return fmt.Errorf("hits[%d]: %w: refused", i, actorlimit.ErrInvalidArgument)
			}
		}
	}
	for i, h := range hits {
		f.ids = append(f.ids, h.ID)
		f.counts[h.ID]++
		c := f.counts[h.ID]
		res := actorlimit.Result{
			Allowed:    c <= h.Policy.Limit,
			Limit:      h.Policy.Limit,
			Count:      c,
			Remaining:  max(0, h.Policy.Limit-c),
			ResetAfter: f.Reset,
		}
		if res.Allowed {
			res.Delay = f.Delay
		} else {
			res.RetryAfter = f.Reset
			for p, d := range f.Retry {
				if len(h.ID) >= len(p) && h.ID[:len(p)] == p {
					res.RetryAfter = d
				}
			}
		}
		results[i] = res
	}
	return nil
}

func (f *fakeLimiter) snapshot() (calls int, ids []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, append([]string(nil), f.ids...)
}

func (f *fakeLimiter) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}
