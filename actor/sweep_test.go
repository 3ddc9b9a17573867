package actor

import (
	"context"
	"fmt"
	"runtime"
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
