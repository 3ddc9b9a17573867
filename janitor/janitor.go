// Package janitor is a timer actor that periodically asks a limiter to
// delete old entries.
//
// The janitor never sees a table. Every Config.Every it sends its target a
// [*Sweep] asking it to delete entries whose window ended more than
// Config.Timeout ago; the target does the deleting. It ticks on a [Ticker]
// made by Config.NewTicker (the limiter's clock, so that tests move it by
// hand), or on the wall clock's time.Ticker; a goroutine of its own forwards
// the ticks, so a busy mailbox cannot postpone a tick forever. It does not
// use protoactor's timer scheduler.
package janitor

import (
	"errors"
	"sync"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
)

// Sweep is the message the janitor sends its target every interval: delete
// the entries whose window ended more than Timeout ago.
type Sweep struct {
	// Timeout is how long after its window ended an entry is kept.
	Timeout time.Duration
}

// Ticker delivers ticks on C until Stop, as a time.Ticker does: a tick that
// finds the previous one not yet taken is dropped.
type Ticker interface {
	// C returns the channel the ticks arrive on.
	C() <-chan time.Time
	// Stop turns the ticker off; no tick arrives after it returns.
	Stop()
}

// Config configures a janitor.
type Config struct {
	// Every is the interval between two sweeps; it must be positive.
	Every time.Duration
	// Timeout is sent in every [Sweep]; it must not be negative.
	Timeout time.Duration
	// Target receives the sweeps.
	Target *protoactor.PID
	// NewTicker makes the ticker; nil means the wall clock's.
	NewTicker func(d time.Duration) Ticker
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
	if c.NewTicker == nil {
		c.NewTicker = wallTicker
	}
	return protoactor.PropsFromProducer(func() protoactor.Actor {
		return &janitor{cfg: c}
	})
}

// wall is the wall clock's ticker.
type wall struct{ t *time.Ticker }

func wallTicker(d time.Duration) Ticker { return wall{time.NewTicker(d)} }

func (w wall) C() <-chan time.Time { return w.t.C }
func (w wall) Stop()               { w.t.Stop() }

// janitor forwards its ticker's ticks to the target from a goroutine that
// lives from Started to Stopping (or Restarting).
type janitor struct {
	cfg  Config
	stop chan struct{}
	wg   sync.WaitGroup
}

// Receive implements protoactor.Actor.
func (j *janitor) Receive(c protoactor.Context) {
	switch c.Message().(type) {
	case *protoactor.Started:
		j.start(c.ActorSystem().Root)
	case *protoactor.Stopping, *protoactor.Restarting:
		j.halt()
	}
}

func (j *janitor) start(root *protoactor.RootContext) {
	if j.stop != nil {
		return
	}
	t := j.cfg.NewTicker(j.cfg.Every)
	j.stop = make(chan struct{})
	j.wg.Add(1)
	go func(stop <-chan struct{}) {
		defer j.wg.Done()
		defer t.Stop()
		for {
			select {
			case <-t.C():
				root.Send(j.cfg.Target, &Sweep{Timeout: j.cfg.Timeout})
			case <-stop:
				return
			}
		}
	}(j.stop)
}

// halt stops the ticker and waits for the forwarding goroutine to end, so
// that no sweep is sent after it returns.
func (j *janitor) halt() {
	if j.stop == nil {
		return
	}
	close(j.stop)
	j.wg.Wait()
	j.stop = nil
}
