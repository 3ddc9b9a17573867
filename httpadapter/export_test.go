package httpadapter

import (
	"context"
	"time"
)

// SetSleep replaces how m waits for a Result.Delay, so tests need not
// sleep.
func SetSleep(m *Middleware, f func(context.Context, time.Duration) error) { m.sleep = f }
