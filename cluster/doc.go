// Package cluster runs an actorlimit limiter as one member of a cluster of
// processes, on the cluster engine of protoactor-go: the public
// [actorlimit.Limiter] API works unchanged on top of a [Member].
//
// # Owners
//
// Ids are hashed onto a fixed number of partitions (Config.Partitions,
// 1024 by default). Each partition is a virtual actor (a grain) that the
// engine places on one live member by rendezvous hashing over the members;
// that member owns the partition's state. When the members change, whole
// partitions move, and a moved partition starts empty on its new owner.
//
// # Modes
//
// In [Owner] mode every check goes to the owner of its partition and waits
// for the answer: exact, at the cost of a round trip when the owner is
// another member.
//
// In [LocalFirst] mode (the default) a FixedWindow hit or peek is answered
// at once from the member's own copy of the key's window: it never waits
// on the network. Every Config.SyncEvery, on the injected clock's ticker,
// the member sends each owner, in one request per member that owns
// partitions, its own total for the current window of each key it counted
// since the last sync; the owner keeps each member's
// largest total (so a retried or repeated sync counts once) and answers
// with the sum over the members. The member's copy becomes that sum plus
// what it counted since it sent. A sync that fails is sent again at the
// next round: no hit is lost. The hits of a member that owns a partition
// are in the owner's count at once: the owner's count is the other
// members' totals plus that member's copy, read as the owner answers.
//
// The owner's state of a partition has an incarnation, new each time the
// partition starts on a member. Every round, each member asks the owner of
// every partition where it holds a copy of a current window whether its
// incarnation changed; if it did (the partition moved, and started empty),
// the member sends its totals for all those copies again, idle ones too,
// in the same round, and the new owner rebuilds the window's count from
// them: a count never drops because an owner died.
//
// While a partition's owner cannot be reached (its last sync failed), the
// member keeps answering from its copies, but admits at most its share of
// the limit, limit divided by the live members, beyond what the owner last
// confirmed; it counts every hit, and the full limit applies again once a
// sync succeeds. The price is inertia: until the next sync, each member
// admits against its own view, so a burst may be over-admitted by about
// what the other members admit in one sync interval.
//
// Checks of the other algorithms (SlidingWindow, SlidingLog, GCRA,
// TokenBucket, LeakyBucket) are not local-first: they are decided by the
// owner, as in Owner mode, and wait for it. While the owner cannot be
// reached they fall back instead of failing: the member decides them alone,
// on a table of its own, with its share of the policy (limit and burst
// divided by the live members), and the owner never learns those hits. The
// check that finds the owner gone waits for its request to fail (at most
// Config.RequestTimeout); the next ones fall back at once, until a sync
// reaches the owner again. Resets always go to the owner, and fail when it
// cannot be reached.
//
// # Memory
//
// Each member's sync deletes, every Config.SweepEvery, the state of ended
// windows: its copies, its fallback's states, and the owner's state of the
// partitions it owns. Config.MaxCopies bounds a member's copies and
// Config.MaxEntries each partition's owner state.
package cluster
