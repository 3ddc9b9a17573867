package redistest

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// RoundTrips is a go-redis hook that counts round trips: each command sent
// alone and each pipeline is one, except those that set up a new
// connection (HELLO, CLIENT SETINFO, AUTH, SELECT), which go-redis sends
// through the hooks too. Add it with client.AddHook; it is safe for
// concurrent use.
type RoundTrips struct{ n atomic.Int64 }

// N returns the round trips counted so far.
func (h *RoundTrips) N() int64 { return h.n.Load() }

// DialHook implements redis.Hook.
func (h *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !setup(cmd) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (h *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || !setup(cmds[0]) {
			h.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

func setup(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "client", "auth", "select":
		return true
	}
	return false
}
