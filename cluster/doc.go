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
// In [LocalFirst] mode (the default) every hit or peek, of every
// algorithm, is answered at once by the member: it never waits on the
// network. Resets go to the owner.
//
// A FixedWindow key's copy is the member's count of the window. Every
// Config.SyncEvery, on the injected clock's ticker, the member sends each
// owner, in one request per member that owns partitions, its own total for
// the current window of each key it counted since the last sync; the
// owner keeps each member's largest total (so a retried or repeated sync
// counts once) and answers with the sum over the members. The member's
// copy becomes that sum plus what it counted since it sent. The hits of a
// member that owns a partition are in the owner's count at once: the
// owner's count is the other members' totals plus that member's copy, read
// as the owner answers.
//
// The other algorithms' state is not a count that members can add up. A
// member's copy of such a key is the owner's state as it last answered,
// with the hits the member allowed since charged to it. The sync sends
// those hits, with their times; the owner charges them to its state,
// whatever its limit says (they happened: a bucket goes into debt, and
// allows nothing until it has drained), counting each once (it knows how
// many of each copy's hits it has charged), and answers with its state,
// which becomes the copy, with the hits allowed since charged again. A
// member that owns a partition decides its keys on the owner's state
// directly, exactly; when the partition leaves it, those states are sent
// whole to the new owner.
//
// A sync that fails is sent again at the next round: no hit is lost.
//
// The owner's state of a partition has an incarnation, new each time the
// partition starts on a member. Every round, each member asks the owner of
// every partition where it holds a copy whether its incarnation changed;
// if it did (the partition moved, and started empty), the member sends
// what it holds there again, in the same round: its totals for the
// current windows, idle ones too, and its copies' states whole, of which
// the new owner keeps the fullest. A count never drops because an owner
// died.
//
// While a partition's owner cannot be reached (its last sync failed), the
// member keeps answering from its copies, without error, but admits at
// most its share of the policy (limit, and a bucket's burst, divided by the
// live members) beyond what the owner last confirmed; it counts every hit,
// sends them once the owner answers again, and the full policy applies
// again. A reset in that time forgets the member's copy at once and is
// kept for the owner, which applies it before the hits counted after it.
// The price of all this is inertia: until the next sync, each member
// admits against its own view, so a burst may be over-admitted by about
// what the other members admit in one sync interval. [Member.SyncStats]
// counts the fallbacks, the failed syncs and the outages.
//
// # Memory
//
// Each member's sync deletes, every Config.SweepEvery, the state of ended
// windows: its copies, and the owner's state of the partitions it owns. Config.MaxCopies bounds a member's copies and
// Config.MaxEntries each partition's owner state.
package cluster
