package janitor_test

import (
	"log/slog"
	"testing"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/janitor"
)

func TestValidate(t *testing.T) {
	target := &protoactor.PID{Id: "x"}
	tests := []struct {
		name string
		cfg  janitor.Config
		want string
	}{
		{"ok", janitor.Config{Every: time.Second, Target: target}, ""},
		{"zero interval", janitor.Config{Target: target}, "interval"},
		{"negative timeout", janitor.Config{Every: time.Second, Timeout: -1, Target: target}, "timeout"},
		{"no target", janitor.Config{Every: time.Second}, "target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// manualTicker is a Ticker the test ticks by hand.
type manualTicker struct {
	ch      chan time.Time
	stopped chan struct{}
}

func (m *manualTicker) C() <-chan time.Time { return m.ch }
func (m *manualTicker) Stop()               { close(m.stopped) }

func TestJanitorSendsSweepsUntilStopped(t *testing.T) {
	sys := protoactor.NewActorSystem(protoactor.WithLoggerFactory(
		func(*protoactor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	sweeps := make(chan *janitor.Sweep, 100)
	target := sys.Root.Spawn(protoactor.PropsFromFunc(func(c protoactor.Context) {
		if s, ok := c.Message().(*janitor.Sweep); ok {
			sweeps <- s
		}
	}))
	tk := &manualTicker{ch: make(chan time.Time), stopped: make(chan struct{})}
	var every time.Duration
	jan := sys.Root.Spawn(janitor.Props(janitor.Config{
		Every: time.Hour, Timeout: 7 * time.Second, Target: target,
		NewTicker: func(d time.Duration) janitor.Ticker { every = d; return tk },
	}))
	for range 3 {
		tk.ch <- time.Now() // taken by the janitor: it is running
		select {
		case s := <-sweeps:
			assert.Equal(t, 7*time.Second, s.Timeout)
		case <-time.After(10 * time.Second):
			t.Fatal("a tick sent no sweep")
		}
	}
	assert.Equal(t, time.Hour, every, "the ticker was not made with the interval")
	require.NoError(t, sys.Root.StopFuture(jan).Wait())
	select {
	case <-tk.stopped:
	default:
		t.Fatal("the ticker was not stopped with the janitor")
	}
	select {
	case tk.ch <- time.Now():
		t.Fatal("the janitor still takes ticks after it stopped")
	default:
	}
}

func TestJanitorOnTheWallClock(t *testing.T) {
	sys := protoactor.NewActorSystem(protoactor.WithLoggerFactory(
		func(*protoactor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	sweeps := make(chan *janitor.Sweep, 1)
	target := sys.Root.Spawn(protoactor.PropsFromFunc(func(c protoactor.Context) {
		if s, ok := c.Message().(*janitor.Sweep); ok {
			select {
			case sweeps <- s:
			default:
			}
		}
	}))
	jan := sys.Root.Spawn(janitor.Props(janitor.Config{Every: time.Millisecond, Target: target}))
	select {
	case <-sweeps:
	case <-time.After(10 * time.Second):
		t.Fatal("no sweep from the wall clock's ticker")
	}
	require.NoError(t, sys.Root.StopFuture(jan).Wait())
}
