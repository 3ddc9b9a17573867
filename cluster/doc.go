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
// In [LocalFirst] mode (the default) every hit, of every algorithm, and
// every peek of an id the member holds a copy of, is answered at once by
// the member: it never waits on the network. Resets go to the owner (see
// Resets). A peek of an id the member holds no copy of asks the owner once,
// and the answer becomes the member's copy: an id over its limit elsewhere
// is over its limit there too.
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
// allows nothing until it has drained; it holds at most one capacity of
// debt, so every member admits again at most (capacity+1)·Period/Limit
// after the charge), counting each once (it knows how
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
// kept for the owner, which gets it with the member's next sync that
// reaches it. The price of all this is inertia: until the next sync, each member
// admits against its own view, so a burst may be over-admitted by about
// what the other members admit in one sync interval. [Member.SyncStats]
// counts the fallbacks, the failed syncs and the outages.
//
// # Resets
//
// A reset is decided by the owner of the key's partition, which forgets
// its state of the key and keeps a mark of the reset: its time. The
// resetting member forgets its copy at once, and so does the member that
// owns the partition. Every sync round, each member asks the owner of
// every partition where it holds a copy, active or idle, for the marks made
// since the last one it saw, and its copies of the keys reset forget the
// owner's count or state they had, and their hits from before the reset. So
// every member sees a reset at its next sync after the owner has it: within
// one sync interval, two for a reset kept while the owner could not be
// reached. Hits and resets are ordered by the members' clocks: the owner
// forgets the hits made before the reset and counts those after (a fixed
// window's total carries the time of its latest hit only: when a member
// counted hits both before and after the reset between two syncs, they all
// count as after it), so a sync from before the reset, late, sent again or
// replayed, cannot bring the old count back, and a reset sent again is
// applied once.
//
// # Memory
//
// Each member's sync deletes, every Config.SweepEvery, the state of ended
// windows: its copies, and the owner's state of the partitions it owns. Config.MaxCopies bounds a member's copies and
// Config.MaxEntries each partition's owner state.
package cluster
