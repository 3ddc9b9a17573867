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
// In [LocalFirst] mode (the default) a FixedWindow hit is answered at once
// from the member's own copy of the key's window. Every Config.SyncEvery,
// on the injected clock's ticker, the member sends each owner, one request
// per partition touched, its own total for the current window of each key
// it counted since the last sync; the owner keeps each member's largest
// total (so a retried or repeated sync counts once, and a partition that
// moved is rebuilt by the next syncs) and answers with the sum over the
// members. The member's copy becomes that sum plus what it counted since it
// sent. A sync that fails is sent again at the next round: no hit is lost.
// While a key's owner cannot be reached (its last sync failed), the member
// keeps answering from its copy, but admits at most its share of the limit,
// limit divided by the live members, beyond what the owner last confirmed;
// it counts every hit, and the full limit applies again once a sync
// succeeds. The price is inertia: until the next sync, each member admits against its
// own view, so a burst may be over-admitted by about what the other members
// admit in one sync interval. Checks of other algorithms, and resets, are
// decided by the owner as in Owner mode.
package cluster
