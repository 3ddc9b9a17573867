package cluster

import (
	"fmt"

	"github.com/actorlimit/actorlimit/algo"
)

// MaxQueuedResetBytes bounds the LocalFirst resets a member keeps for
// owners it cannot reach, all partitions together, each counted as its
// id's length plus 128 bytes (about 25 000 resets of 32-byte ids). Past it
// a reset is refused with an error, changing nothing (the member's copy of
// the key stays), counted in SyncStats.RefusedResets, and logged at WARN
// once an outage; the caller may try again once the owner answers.
const MaxQueuedResetBytes = 4 << 20

// queuedCost is what a queued reset of c is taken to cost towards
// MaxQueuedResetBytes.
func queuedCost(c *algo.Check) int64 { return int64(len(c.ID)) + 128 }

// queueFull returns an error when queueing checks, resets of partition
// p, would pass MaxQueuedResetBytes, and counts and logs the refusal.
// m.resetMu is held.
func (m *Member) queueFull(p int, checks []algo.Check) error {
	var cost int64
	for i := range checks {
		cost += queuedCost(&checks[i])
	}
	if m.resetBytes+cost <= MaxQueuedResetBytes {
		return nil
	}
	m.counters.refusedResets.Add(uint64(len(checks)))
	if !m.resetsFullLogged {
		m.resetsFullLogged = true
		m.cfg.Logger.Warn("actorlimit cluster: resets refused: the resets kept for owners that cannot be reached are at their bound (logged once an outage)",
			"partition", p, "bound_bytes", MaxQueuedResetBytes)
	}
	return fmt.Errorf("cluster: partition %d: its owner cannot be reached and the resets kept for owners are at their bound (%d bytes): reset refused", p, MaxQueuedResetBytes)
}
