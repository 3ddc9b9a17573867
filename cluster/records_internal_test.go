package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
)

// TestRecordsKeepEachState: the states an owner hands on when a partition
// leaves it are each key's own, not the last one walked many times (the
// table's walk reuses one buffer for every record's state).
func TestRecordsKeepEachState(t *testing.T) {
	now := time.Unix(1_700_002_800, 0).UnixNano()
	o := newOwnerPart(0)
	want := map[string][]byte{}
	for i, id := range []string{"a", "b", "c"} {
		c := algo.Check{Algorithm: algo.GCRA, ID: id, Period: time.Minute, Limit: 10, Burst: 10, N: int64(i + 1)}
		require.True(t, o.apply(&c, now).Allowed)
		want[id] = append([]byte(nil), o.table.Record(&c).State...)
	}
	got := map[string][]byte{}
	for _, r := range o.records(now) {
		got[r.ID] = r.State
	}
	assert.Equal(t, want, got)
}
