package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// TestBackupLeavesALaterChangeDirty: a change to an owner's state that is
// made after the sync took the state for its backup leaves the state dirty
// (sent again by the next sync), and the backup the sync took counts only
// once the backup member acknowledges it. Before, a change marked the state
// dirty before it was made: a backup taken between the two marked it
// clean without the change, which then no backup carried until the
// partition's next change (for a key idle after it, none); and a backup
// counted from when it was sent.
func TestBackupLeavesALaterChangeDirty(t *testing.T) {
	now := int64(time.Hour)
	hit := algo.Check{Op: algo.OpHit, Algorithm: algo.FixedWindow, ID: "k", Period: time.Minute, Limit: 5, N: 1}
	tests := []struct {
		name   string
		change func(o *ownerPart)
	}{
		{"a check", func(o *ownerPart) { o.apply(&hit, now) }},
		{"a run of checks", func(o *ownerPart) { o.decide(now, []algo.Check{hit, hit}, make([]algo.Decision, 2)) }},
		{"a member's total", func(o *ownerPart) {
			o.add("127.0.0.1:4001", localKey{id: "k", period: int64(time.Minute)}, 60, 1, 3, now)
		}},
		{"a charge", func(o *ownerPart) {
			o.charge1(&clusterpb.Charge{Checks: []*clusterpb.Check{checkToWire(&hit)}, Allowed: []bool{true}}, now, now)
		}},
		{"a state loaded", func(o *ownerPart) {
			o.load(&clusterpb.PartState{Records: []*clusterpb.Record{{Algorithm: uint32(algo.GCRA), PeriodNs: int64(time.Minute), Id: "g", Death: 2 * now, State: make([]byte, 8)}}},
				now, "127.0.0.1:4002", func(localKey, int64) (uint64, bool) { return 0, false })
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newOwnerPart(0)
			o.takeBackup()
			o.backupDone(true)
			require.False(t, o.backupPending(), "backed up")

			o.mu.Lock() // another use of the state: the change waits for it
			done := make(chan struct{})
			go func() { defer close(done); tt.change(o) }()
			// A change that marks the state before it is made has done so
			// by now; one made first has not.
			for deadline := time.Now().Add(100 * time.Millisecond); !o.dirty.Load() && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			o.takeBackup() // the sync takes the state: without the change, which waits
			assert.True(t, o.backupPending(), "a backup taken, not yet acknowledged")
			o.mu.Unlock()
			<-done
			o.backupDone(true)
			assert.True(t, o.backupPending(), "the change, made after the backup was taken, waits for the next")

			o.takeBackup()
			o.backupDone(false)
			assert.True(t, o.backupPending(), "a backup not taken is sent again")
			o.takeBackup()
			o.backupDone(true)
			assert.False(t, o.backupPending(), "backed up")
		})
	}
}
