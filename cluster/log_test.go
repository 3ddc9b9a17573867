package cluster_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/internal/logtest"
)

// TestOwnerOutageLoggedOnce: while the owners do not answer, every sync
// round fails for every partition it touches, yet the member logs the
// outage once, at WARN, and the round in which every owner answers again
// once, at INFO; a second outage is logged again.
func TestOwnerOutageLoggedOnce(t *testing.T) {
	logs := &logtest.Recorder{}
	d := detachedWith(t, 1, cluster.Config{Clock: newFakeClock(), Logger: slog.New(logs)})
	m := d.members[0]
	round := func(keys int) {
		for k := range keys { // keys over several of the 16 partitions
			d.hit(t, 0, fmt.Sprint("k", k), minute, 1)
		}
		m.SyncNow()
	}
	logged := func() (levels []string) {
		for _, r := range logs.Records() {
			if !strings.HasPrefix(r, "DEBUG ") { // each failed sync is at DEBUG
				levels = append(levels, strings.Fields(r)[0])
			}
		}
		return levels
	}

	round(8)
	assert.Empty(t, logged(), "syncs that succeed log nothing")
	d.down.Store(true)
	for range 5 {
		round(8)
	}
	assert.Equal(t, []string{"WARN"}, logged(), "five failed rounds over several partitions: one line")
	d.down.Store(false)
	round(8)
	round(8)
	assert.Equal(t, []string{"WARN", "INFO"}, logged())
	d.down.Store(true)
	round(1)
	d.down.Store(false)
	round(1)
	assert.Equal(t, []string{"WARN", "INFO", "WARN", "INFO"}, logged())
	recs := logs.Records()
	var notable []string
	for _, r := range recs {
		if !strings.HasPrefix(r, "DEBUG ") {
			notable = append(notable, r)
		}
	}
	assert.Contains(t, notable[0], "actorlimit cluster: owner unreachable")
	assert.Contains(t, notable[1], "actorlimit cluster: every owner answers again")
}
