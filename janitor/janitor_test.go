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

func TestJanitorSendsSweepsUntilStopped(t *testing.T) {
	sys := protoactor.NewActorSystem(protoactor.WithLoggerFactory(
		func(*protoactor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	sweeps := make(chan *janitor.Sweep, 100)
	target := sys.Root.Spawn(protoactor.PropsFromFunc(func(c protoactor.Context) {
		if s, ok := c.Message().(*janitor.Sweep); ok {
			select {
			case sweeps <- s:
			default:
			}
		}
	}))
	jan := sys.Root.Spawn(janitor.Props(janitor.Config{Every: time.Millisecond, Timeout: 7 * time.Second, Target: target}))
	for range 3 {
		select {
		case s := <-sweeps:
			assert.Equal(t, 7*time.Second, s.Timeout)
		case <-time.After(5 * time.Second):
			t.Fatal("no sweep")
		}
	}
	require.NoError(t, sys.Root.StopFuture(jan).Wait())
	for len(sweeps) > 0 { // drain what was sent before the stop
		<-sweeps
	}
	select {
	case <-sweeps:
		// one tick may have been in flight when the janitor stopped
	case <-time.After(20 * time.Millisecond):
	}
	select {
	case <-sweeps:
		t.Fatal("the janitor kept ticking after it stopped")
	case <-time.After(20 * time.Millisecond):
	}
}
