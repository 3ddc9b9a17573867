package cluster

import "sync/atomic"

// SyncStats counts what a member's LocalFirst checks and syncs, its
// Owner-mode fallbacks, and its partitions' hand-offs, did since it
// started. The metrics package exports them (metrics.Collector.SetCluster).
type SyncStats struct {
	// Fallbacks is the hits decided while their partition's owner could
	// not be reached: on the member's copy, within its share of the limit.
	Fallbacks uint64
	// Rounds is the sync rounds run; Requests the requests they sent to
	// owners (one per owning member, or per partition where the owner is
	// not known); Failures those that failed (their hits are sent again).
	Rounds, Requests, Failures uint64
	// Outages is the times the member went from reaching every owner to
	// not reaching one; Recoveries the times it went back.
	Outages, Recoveries uint64
	// Rebuilds is the times an owner was found to have started empty, and
	// the member sent it what it holds of the partition again.
	Rebuilds uint64
	// QueuedResets is the resets kept for an owner that could not be
	// reached, sent with a later sync.
	QueuedResets uint64
	// Seeds is the peeks that asked the owner for a key's count or state
	// because the member held no copy of it.
	Seeds uint64
	// HandOffs is the partitions this member took from their previous
	// owner, alive, with its state: when a member joined or left
	// gracefully. Refusals is the requests (checks, or a partition's
	// part of a sync) this member refused because it did not own their
	// partition (the sender asks the owner it names), and the messages
	// its view did not allow: a sync from a member not in it, a partition
	// handed on, or backed up, by a member it may not take it from. TakeOvers is the
	// partitions it took from its backup of them when their owner died;
	// Backups the partitions' states it sent to their backup member.
	HandOffs, Refusals, TakeOvers, Backups uint64
	// Rejected is the messages from other members this member rejected
	// whole, changing nothing, because they failed its checks: an id
	// longer than the API allows or of another partition, a negative
	// count, a window after the next one by this member's clock (a
	// sender whose clock is ahead), a state that does not decode, a
	// reset that is not one (see docs/cluster.md). A member counting
	// them is faulty, misconfigured or hostile: they are logged at WARN,
	// at most once a minute.
	Rejected uint64
	// KeyMismatches is the requests refused because their sender's
	// Config.PartitionKey differs from this member's.
	KeyMismatches uint64
	// RefusedResets is the LocalFirst resets refused, with an error,
	// because the resets kept for owners that could not be reached had
	// reached MaxQueuedResetBytes.
	RefusedResets uint64
	// OwnerFallbacks is the Owner-mode checks this member decided on its
	// share of the policy because their owner did not answer within
	// Config.OwnerWait. Charged is how many of those the owner has since
	// counted (the sync sent them, or the owner decided the request after
	// all); ChargesDropped those dropped, beyond the bound of the checks
	// kept for owners (65 536). OwnerFallbacks - Charged - ChargesDropped
	// wait for their owner.
	OwnerFallbacks, Charged, ChargesDropped uint64
	// Retries is the Owner-mode requests this member sent again, under the
	// same id, because no answer had come (a lost answer, or an owner that
	// does not answer); Deduplicated is the requests (and charges) it
	// answered, as an owner, from what it remembered of the first: counted
	// once.
	Retries, Deduplicated uint64
	// Rejoins is the times the other members dropped this one (it was
	// silent for longer than DeadAfter: stopped, paused, cut off) and it
	// restarted its engine under a new id to rejoin them (rejoin.go).
	Rejoins uint64
}

// counters are a member's SyncStats as they run.
type counters struct {
	fallbacks                     atomic.Uint64
	rounds, requests, failures    atomic.Uint64
	outages, recoveries, rebuilds atomic.Uint64
	queuedResets, seeds           atomic.Uint64
	handOffs, refusals            atomic.Uint64
	takeOvers, backups            atomic.Uint64
	rejected                      atomic.Uint64
	keyMismatches, refusedResets  atomic.Uint64
	ownerFallbacks, charged       atomic.Uint64
	chargesDropped                atomic.Uint64
	retries, deduped              atomic.Uint64
	rejoins                       atomic.Uint64
}

// SyncStats returns what the member's checks and syncs did since it
// started.
func (m *Member) SyncStats() SyncStats {
	c := &m.counters
	return SyncStats{
		Fallbacks: c.fallbacks.Load(),
		Rounds:    c.rounds.Load(), Requests: c.requests.Load(), Failures: c.failures.Load(),
		Outages: c.outages.Load(), Recoveries: c.recoveries.Load(), Rebuilds: c.rebuilds.Load(),
		QueuedResets: c.queuedResets.Load(), Seeds: c.seeds.Load(),
		HandOffs: c.handOffs.Load(), Refusals: c.refusals.Load(),
		TakeOvers: c.takeOvers.Load(), Backups: c.backups.Load(),
		Rejected:      c.rejected.Load(),
		KeyMismatches: c.keyMismatches.Load(), RefusedResets: c.refusedResets.Load(),
		OwnerFallbacks: c.ownerFallbacks.Load(), Charged: c.charged.Load(), ChargesDropped: c.chargesDropped.Load(),
		Retries: c.retries.Load(), Deduplicated: c.deduped.Load(),
		Rejoins: c.rejoins.Load(),
	}
}
