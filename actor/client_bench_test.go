package actor

import (
	"context"
	"log/slog"
	"testing"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"

	"github.com/actorlimit/actorlimit/algo"
)

type frozenClock struct{}

func (frozenClock) Now() time.Time { return time.Unix(1_700_000_000, 0) }

// BenchmarkDo is one check through the mailbox by a lone caller: the cost
// of the synchronous path around the table.
func BenchmarkDo(b *testing.B) {
	sys := protoactor.NewActorSystem(protoactor.WithLoggerFactory(
		func(*protoactor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	c, err := Start(sys.Root, Config{Clock: frozenClock{}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	chk := algo.Check{Op: algo.OpHit, ID: "a", Period: time.Hour, Limit: 1 << 40, N: 1}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Do(ctx, chk); err != nil {
			b.Fatal(err)
		}
	}
}
