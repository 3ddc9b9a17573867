package cluster_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/internal/logtest"
)

// TestLocalFirstQueuedResetsBounded: while the owners cannot be reached, a
// member keeps resets for them up to MaxQueuedResetBytes; past it a reset
// is refused with an error and changes nothing (the member's copy keeps
// its count), is counted and logged once; once the owner answers, the
// queue drains and resets are kept again.
func TestLocalFirstQueuedResetsBounded(t *testing.T) {
	logs := &logtest.Recorder{}
	d := detachedWith(t, 1, cluster.Config{Clock: newFakeClock(), Logger: slog.New(logs)})
	m := d.members[0]
	p := actorlimit.Policy{Limit: 10, Period: time.Hour}
	long := strings.Repeat("x", actorlimit.MaxIDLength-10)
	kept := long + "kept------" // as long as the others: it does not fit
	d.hit(t, 0, kept, p, 4)
	d.down.Store(true)
	m.SyncNow() // the owner is cut off
	fits := cluster.MaxQueuedResetBytes / (len(long) + 10 + 128)
	for i := range fits {
		require.NoError(t, m.Limiter.Reset(t.Context(), fmt.Sprintf("%s%010d", long, i), p), "reset %d of %d", i, fits)
	}
	for range 3 {
		err := m.Limiter.Reset(t.Context(), kept, p)
		require.Error(t, err)
		assert.ErrorContains(t, err, "reset refused")
	}
	assert.EqualValues(t, 4, peekCount(t, m, kept, p).Count, "a refused reset changes nothing")
	st := m.SyncStats()
	assert.EqualValues(t, fits, st.QueuedResets)
	assert.EqualValues(t, 3, st.RefusedResets)
	warns := 0
	for _, r := range logs.Records() {
		if strings.HasPrefix(r, "WARN ") && strings.Contains(r, "resets refused") {
			warns++
		}
	}
	assert.Equal(t, 1, warns, "logged once")

	d.down.Store(false)
	m.SyncNow()
	require.NoError(t, m.Limiter.Reset(t.Context(), kept, p), "the queue went to the owners")
	assert.Zero(t, peekCount(t, m, kept, p).Count)
}
