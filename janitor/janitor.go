// Package janitor is a timer actor that periodically asks a limiter to
// delete old entries.
//
// The janitor never sees a table. Every Config.Every it sends its target a
// [*Sweep] asking it to delete entries whose window ended more than
// Config.Timeout ago; the target does the deleting. It ticks with
// protoactor's timer scheduler, not with a receive timeout, so a busy
// mailbox cannot postpone a tick forever.
package janitor

import (
	"errors"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
)

// Sweep is the message the janitor sends its target every interval: delete
// the entries whose window ended more than Timeout ago.
type Sweep struct {
	// Timeout is how long after its window ended an entry is kept.
	Timeout time.Duration
}

// Config configures a janitor.
type Config struct {
	// Every is the interval between two sweeps; it must be positive.
	Every time.Duration
	// Timeout is sent in every [Sweep]; it must not be negative.
	Timeout time.Duration
	// Target receives the sweeps.
	Target *protoactor.PID
}

// Validate reports what is wrong with c, if anything.
func (c Config) Validate() error {
	switch {
	case c.Every <= 0:
		return errors.New("janitor: interval must be positive")
	case c.Timeout < 0:
		return errors.New("janitor: timeout must not be negative")
	case c.Target == nil:
		return errors.New("janitor: no target")
	}
	return nil
}

// Props returns the props of a janitor actor for c, which must be valid.
func Props(c Config) *protoactor.Props {
	return protoactor.PropsFromProducer(func() protoactor.Actor {
		return &janitor{cfg: c}
	})
}

// tick is the timer's message to the janitor itself.
type tick struct{}

type janitor struct {
	cfg    Config
	cancel scheduler.CancelFunc
}

// Receive implements protoactor.Actor.
func (j *janitor) Receive(c protoactor.Context) {
	switch c.Message().(type) {
	case *protoactor.Started:
		s := scheduler.NewTimerScheduler(c.ActorSystem().Root)
		j.cancel = s.SendRepeatedly(j.cfg.Every, j.cfg.Every, c.Self(), tick{})
	case tick:
		c.Send(j.cfg.Target, &Sweep{Timeout: j.cfg.Timeout})
	case *protoactor.Stopping, *protoactor.Restarting:
		if j.cancel != nil {
			j.cancel()
			j.cancel = nil
		}
	}
}
