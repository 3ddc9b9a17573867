package actor

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/table"
)

// events is a log of what a store and a journal were asked to do, in
// order.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	e.log = append(e.log, s)
	e.mu.Unlock()
}

func (e *events) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.log...)
}

// eventJournal is a fake [Journal] that logs the calls of a snapshot.
type eventJournal struct {
	ev       *events
	snapshot func() // asks the limiter for a snapshot
}

func (j *eventJournal) Load(int64, func(algo.Record) error) error { return nil }
func (j *eventJournal) Start(_ iter.Seq[algo.Record], snapshot, _ func()) {
	j.snapshot = snapshot
}
func (j *eventJournal) Append(algo.Record)                 {}
func (j *eventJournal) Commit()                            {}
func (j *eventJournal) BeginSnapshot() bool                { j.ev.add("begin"); return true }
func (j *eventJournal) SnapshotRecord(r algo.Record)       { j.ev.add("record") }
func (j *eventJournal) EndSnapshot()                       { j.ev.add("end") }
func (j *eventJournal) Failures() (errors, dropped uint64) { return 0, 0 }
func (j *eventJournal) Close() error                       { return nil }

// eventTable is the table, whose Decide calls are logged. Once armed,
// after its next walk of a chunk it calls during.
type eventTable struct {
	*table.Table
	ev     *events
	armed  atomic.Bool
	during func()
	once   sync.Once
}

func (s *eventTable) Decide(ctx context.Context, now int64, checks []algo.Check, out []algo.Decision) error {
	s.ev.add("decide " + checks[0].ID)
	return s.Table.Decide(ctx, now, checks, out)
}

func (s *eventTable) SnapshotChunk(now int64, cur *algo.Cursor, max int, fn func(algo.Record) bool) bool {
	more := s.Table.SnapshotChunk(now, cur, max, fn)
	if s.armed.Load() {
		s.once.Do(s.during)
	}
	return more
}

// startSnapshotting starts a limiter on a table of keys fixed-window keys,
// behind a store and a journal that record what happens, in order, in the
// events it returns.
func startSnapshotting(t *testing.T, keys int) (*Client, *eventTable, *eventJournal, *events) {
	t.Helper()
	ev := &events{}
	tb := table.New(0)
	now := frozenClock{}.Now().UnixNano()
	for i := range keys {
		c := algo.Check{Algorithm: algo.FixedWindow, Period: time.Hour, Limit: 10, ID: fmt.Sprint("k", i), N: 1}
		tb.Apply(&c, now)
	}
	store := &eventTable{Table: tb, ev: ev}
	j := &eventJournal{ev: ev}
	sys := protoactor.NewActorSystem(protoactor.WithLoggerFactory(
		func(*protoactor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	c, err := Start(sys.Root, Config{Clock: frozenClock{}, Store: store, Journal: j})
	require.NoError(t, err)
	return c, store, j, ev
}

// TestSnapshotInChunks: a snapshot is taken a chunk of keys a message, so
// a check that arrives while it is taken waits for one chunk, not for the
// whole state.
func TestSnapshotInChunks(t *testing.T) {
	const keys = 3*SnapshotChunk + 5
	c, store, j, ev := startSnapshotting(t, keys)
	t.Cleanup(func() { _ = c.Close() })

	// after the first chunk, a check from another goroutine, which waits in
	// the limiter's mailbox when the chunk's message ends
	answered := make(chan error, 1)
	store.during = func() {
		go func() {
			_, err := c.Do(context.Background(), hit("during", 1))
			answered <- err
		}()
		waitFor(t, func() bool { return queued(c) == 1 })
	}
	store.armed.Store(true)
	j.snapshot()
	require.NoError(t, <-answered)
	waitFor(t, func() bool { return slices.Contains(ev.all(), "end") })

	got := ev.all()
	require.Equal(t, "begin", got[0])
	records, at := 0, -1
	for i, e := range got {
		switch e {
		case "record":
			records++
		case "decide during":
			at = i
		}
	}
	assert.Equal(t, keys, records, "every key in the snapshot")
	require.Positive(t, at, "the check was decided: %v", got[:min(len(got), 5)])
	assert.Equal(t, 1+SnapshotChunk, at, "the check waited for one chunk, not for the %d keys", keys)
}

// TestCloseFinishesSnapshot: Close while a snapshot is being taken
// finishes that snapshot, from where it stood: every key in it once.
func TestCloseFinishesSnapshot(t *testing.T) {
	const keys = 3*SnapshotChunk + 5
	c, store, j, ev := startSnapshotting(t, keys)

	closed := make(chan error, 1)
	store.during = func() { // after the first chunk, Close: it stops the limiter first
		go func() { closed <- c.Close() }()
		waitFor(t, func() bool { return queued(c) == 1 })
	}
	store.armed.Store(true)
	j.snapshot()
	require.NoError(t, <-closed)

	got := ev.all()
	counts := map[string]int{}
	for _, e := range got {
		counts[e]++
	}
	assert.Equal(t, map[string]int{"begin": 1, "record": keys, "end": 1}, counts)
	assert.Equal(t, "end", got[len(got)-1])
}

// keptJournal keeps every record it is handed, the last one of each id.
type keptJournal struct {
	mu   sync.Mutex
	kept map[string]algo.Record
}

func (j *keptJournal) keep(r algo.Record) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.kept == nil {
		j.kept = map[string]algo.Record{}
	}
	j.kept[r.ID] = r
}
func (j *keptJournal) Load(int64, func(algo.Record) error) error   { return nil }
func (j *keptJournal) Start(iter.Seq[algo.Record], func(), func()) {}
func (j *keptJournal) Append(r algo.Record)                        { j.keep(r) }
func (j *keptJournal) Commit()                                     {}
func (j *keptJournal) BeginSnapshot() bool                         { return true }
func (j *keptJournal) SnapshotRecord(r algo.Record)                { j.keep(r) }
func (j *keptJournal) EndSnapshot()                                {}
func (j *keptJournal) Failures() (errors, dropped uint64)          { return 0, 0 }
func (j *keptJournal) Close() error                                { return nil }

// TestCloseWaitsForTheLastTurn: a caller that took the turn before the
// limiter stopped for good, and decides its check on the table in place
// after it stopped, holds Close's last snapshot back until its turn ends,
// and its check is in that snapshot.
func TestCloseWaitsForTheLastTurn(t *testing.T) {
	j := &keptJournal{}
	sys := protoactor.NewActorSystem(protoactor.WithLoggerFactory(
		func(*protoactor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	c, err := Start(sys.Root, Config{Clock: frozenClock{}, Journal: j})
	require.NoError(t, err)
	chk := algo.Check{Algorithm: algo.FixedWindow, Period: time.Hour, Limit: 10, ID: "a", N: 1}
	_, err = c.Do(context.Background(), chk)
	require.NoError(t, err)

	// The limiter stops for good, as Close has it stop, while a caller
	// holds the turn: it saw the limiter running and decides its check.
	m := c.h.mailbox.Load()
	require.True(t, m.lockTurn(context.Background()))
	c.h.stopped()
	closed := make(chan error, 1)
	go func() { closed <- c.h.closeJournal() }()
	for m.takers.Load() == 0 {
		select {
		case err := <-closed:
			t.Fatalf("the last snapshot was taken during a turn (error %v)", err)
		default:
			runtime.Gosched()
		}
	}
	var d algo.Decision
	m.h.decideOne(&chk, &d, frozenClock{}.Now().UnixNano())
	require.True(t, d.Allowed)
	m.turn.Unlock()
	require.NoError(t, <-closed)

	tb := table.New(0)
	require.NoError(t, tb.Load(frozenClock{}.Now().UnixNano(), j.kept["a"]))
	peek := chk
	peek.Op = algo.OpPeek
	assert.EqualValues(t, 2, tb.Apply(&peek, frozenClock{}.Now().UnixNano()).Count, "hits of a in the last snapshot")
}
