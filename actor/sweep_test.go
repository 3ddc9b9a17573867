package actor

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/table"
)

// chunkedTable is the embedded table behind an Expire that counts its
// chunks and calls between once, on the limiter's goroutine, right after
// the first chunk: what between queues then runs before the next chunk.
type chunkedTable struct {
	*table.Table
	chunks  int
	between func()
}

func (s *chunkedTable) Expire(before int64, max int) (int, bool) {
	n, more := s.Table.Expire(before, max)
	s.chunks++
	if s.chunks == 1 && s.between != nil {
		s.between()
	}
	return n, more
}

// TestSweepLetsChecksInBetweenChunks: a sweep deletes at most SweepChunk
// entries a message and the checks queued meanwhile run between two
// chunks. On an injected clock, with several chunks of entries whose
// windows ended and live ones beside them, a check that arrives after the
// first chunk on an ended entry not yet deleted makes it live again (it is
// kept, counting from 1 in its new window), and one on an entry already
// deleted makes a new live one (kept too); every other ended entry is
// deleted, no live one is, and a second sweep finds nothing.
func TestSweepLetsChecksInBetweenChunks(t *testing.T) {
	const ended, live = 3*SweepChunk + 5, 50
	now := frozenClock{}.Now()
	past := now.Add(-2 * time.Hour).UnixNano() // hit's windows are an hour
	st := &chunkedTable{Table: table.New(0)}
	old := func(i int) string { return fmt.Sprintf("old%04d", i) } // deleted in this order
	for i := range ended {
		c := hit(old(i), 3)
		st.Apply(&c, past)
	}
	for i := range live {
		c := hit(fmt.Sprint("live", i), 2)
		st.Apply(&c, now.UnixNano())
	}
	c := startWithStore(t, st, 0)
	require.False(t, c.h.turns, "the test needs the limiter's own sweep messages")
	ctx := context.Background()
	type answer struct {
		d   algo.Decision
		err error
	}
	revived, recreated := make(chan answer, 1), make(chan answer, 1)
	st.between = func() {
		m := c.h.mailbox.Load()
		queued := m.users.Load()
		for _, q := range []struct {
			id  string
			out chan answer
		}{{old(ended - 1), revived}, {old(0), recreated}} {
			go func() {
				d, err := c.Do(ctx, hit(q.id, 1))
				q.out <- answer{d, err}
			}()
			queued++
			for m.users.Load() < queued { // queued behind this chunk
				runtime.Gosched()
			}
		}
	}

	n, err := c.Sweep(ctx)
	require.NoError(t, err)
	assert.Greater(t, st.chunks, 3, "the sweep was not cut into chunks")
	assert.Equal(t, ended-1, n, "the entry hit between two chunks was deleted, or a deleted one not counted")
	for _, ch := range []chan answer{revived, recreated} {
		a := <-ch
		require.NoError(t, a.err)
		assert.Equal(t, int64(1), a.d.Count, "a check between chunks saw the ended window's count")
	}
	s, err := c.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, live+2, s.Entries)
	for i := range live {
		p := hit(fmt.Sprint("live", i), 1)
		p.Op = algo.OpPeek
		d, err := c.Do(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, int64(2), d.Count, "live%d lost its count", i)
	}
	n, err = c.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "a second sweep found more to delete")
}

// TestSweepUnderASteadyLoad: under a load that never lets up (a caller
// always waits for the turn), a sweep of the embedded table is left to the
// callers after its first chunk: one entry in every choreEvery turns, so
// it ends after a known number of checks, with every ended entry deleted
// and no live one, and every check decided. When the callers stop waiting,
// what is left goes back in the queue and is deleted at once, in chunks.
func TestSweepUnderASteadyLoad(t *testing.T) {
	const ended, live = SweepChunk + 10, 20
	for _, stop := range []bool{false, true} {
		t.Run(fmt.Sprintf("callers stop waiting=%v", stop), func(t *testing.T) {
			tb := table.New(0)
			now := frozenClock{}.Now()
			past := now.Add(-2 * time.Hour).UnixNano()
			for i := range ended {
				c := hit(fmt.Sprint("old", i), 1)
				tb.Apply(&c, past)
			}
			for i := range live {
				c := hit(fmt.Sprint("live", i), 1)
				tb.Apply(&c, now.UnixNano())
			}
			c := startWithStore(t, tb, 0)
			require.True(t, c.h.turns)
			m := c.h.mailbox.Load()
			ctx := context.Background()
			m.takers.Add(1) // a caller that always waits: every turn is handed on
			waiting := true
			t.Cleanup(func() { // before Close, which needs the queue run
				if waiting {
					m.takers.Add(-1)
				}
			})
			type result struct {
				n   int
				err error
			}
			swept := make(chan result, 1)
			go func() {
				n, err := c.Sweep(ctx)
				swept <- result{n, err}
			}()
			chore := func() bool { // looks, on a turn of its own that it does not hand on
				m.turn.Lock()
				defer m.turn.Unlock()
				return m.chore != nil
			}
			for !chore() { // the first chunk is done: the rest is the chore
				runtime.Gosched()
			}
			// The sweep's own turn was the first handed on since; each check
			// below is another. The chore has SweepChunk entries deleted and
			// ended-SweepChunk left, one a bit.
			turns := choreEvery*(ended-SweepChunk) - 1
			if stop {
				turns = 2*choreEvery - 1 // two bits, then nobody waits
			}
			for i := range turns {
				require.True(t, chore(), "the sweep ended after %d checks", i)
				d, err := c.Do(ctx, hit(fmt.Sprint("live", i%live), 1))
				require.NoError(t, err)
				require.Equal(t, int64(2+i/live), d.Count, "check %d", i)
			}
			if stop {
				require.True(t, chore())
				m.takers.Add(-1)
				waiting = false
				_, err := c.Do(ctx, hit("live0", 1)) // nobody waits: the rest goes at once
				require.NoError(t, err)
			}
			require.False(t, chore(), "the sweep did not end")
			r := <-swept
			require.NoError(t, r.err)
			assert.Equal(t, ended, r.n)
			if waiting {
				m.takers.Add(-1)
				waiting = false
			}
			st, err := c.Stats(ctx)
			require.NoError(t, err)
			assert.Equal(t, live, st.Entries, "a live entry was deleted, or an ended one kept")
			assert.Equal(t, uint64(ended), st.Expired)
			assert.Equal(t, uint64(1), st.Sweeps)
		})
	}
}

// TestSweepBitEndsTheSweep: a bit that finds nothing more to delete ends
// the sweep as its last chunk would: the caller of Sweep is answered with
// the total, a janitor's limiter may begin the next; a bit that panics
// answers the caller of Sweep with ErrPanicked and goes on panicking.
func TestSweepBitEndsTheSweep(t *testing.T) {
	h := newHeir(Config{Clock: frozenClock{}})
	past := frozenClock{}.Now().Add(-2 * time.Hour).UnixNano()
	for i := range 2 {
		c := hit(fmt.Sprint("old", i), 1)
		h.store.(*table.Table).Apply(&c, past)
	}
	before := frozenClock{}.Now().UnixNano()
	k := &call{kind: callSweep, done: make(chan struct{}, 1)}
	s := &sweep{before: before, reply: k}
	assert.True(t, h.sweepBit(s), "ended after one of two entries")
	assert.False(t, h.sweepBit(s))
	require.Equal(t, answered, k.state.Load())
	require.NoError(t, k.err)
	assert.Equal(t, 2, k.n)
	assert.Equal(t, uint64(1), h.sweeps)

	l := &limiter{h: h, sweeping: true}
	assert.False(t, h.sweepBit(&sweep{before: before, janitor: l}))
	assert.False(t, l.sweeping, "the janitor's limiter still thinks it sweeps")

	var broken atomic.Bool
	h.cfg.Clock = clockFunc(func() time.Time {
		if broken.Load() {
			panic("clock broken by the test")
		}
		return frozenClock{}.Now()
	})
	broken.Store(true) // the sweep's end reads the clock
	k = &call{kind: callSweep, done: make(chan struct{}, 1)}
	assert.Panics(t, func() { h.sweepBit(&sweep{before: before, reply: k}) })
	require.Equal(t, answered, k.state.Load())
	assert.ErrorIs(t, k.err, ErrPanicked)
}

// clockFunc is a Clock that calls itself.
type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }
