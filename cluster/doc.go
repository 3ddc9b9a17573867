// Package cluster runs an actorlimit limiter as one member of a cluster of
// processes, on the cluster engine of protoactor-go: the public
// [actorlimit.Limiter] API works unchanged on top of a [Member].
//
// # Owners
//
// Ids are hashed onto a fixed number of partitions (Config.Partitions,
// 1024 by default) by SipHash-2-4 keyed by Config.PartitionKey, which the
// members share: nobody without the key can choose ids of one partition. Each member places them itself, by rendezvous hashing
// over the members it takes for live (its view, from the engine's member
// list): a partition's owner is the member of highest score for it, its
// backup the next one ([Member.OwnerOf]). A member answers as a
// partition's owner (decides its checks, takes its syncs) only while it
// holds the partition's state; any other member refuses, naming the owner
// it knows, and the sender asks there. So at most one member decides for
// a partition at any moment, whatever the members' views; the exception is
// a member that the others take for dead while it lives (stopped, or cut
// off from them): until it sees the change itself, it decides its own
// callers' checks of the partitions it held, on its old state.
//
// # Membership changes
//
// Each change a member sees is logged at INFO, with the members before and
// after. When the members change, whole partitions move:
//
//   - To a member that joins, or away from one that leaves gracefully
//     (Close), a partition is handed on: its old owner stops deciding
//     there at once, and sends its whole state (and its own copies'
//     counts) to the new owner, which answers for it from then on. Requests
//     meanwhile are refused and retried at the owner named (a few
//     milliseconds); nothing counted is lost or counted twice, and Owner
//     mode stays exact.
//   - Every sync (SyncEvery, in both modes) an owner sends the state of
//     each partition that changed since to its backup member. When the
//     owner dies, the backup, which becomes the owner in the others' views,
//     takes over from the last state it took whole: the partition loses at
//     most what its owner admitted since that state was taken (its last
//     sync interval, and a backup under way when it died). In LocalFirst
//     mode the other members send the new owner what they hold (below), so
//     only the dead owner's own hits since its last backup can be lost.
//   - A member whose view gives it a partition, held by a live member,
//     waits for the hand-off; one that no live member holds (the cluster
//     starts, an owner died without a backup) starts empty.
//
// No message between members is larger than [MaxMessageBytes]: a state
// larger than that goes in pieces, which the receiver takes only once it
// has them all, so a hand-off never starts a partition with part of its
// state, and a backup replaces the one before only whole; a sync sends an
// owner its partitions' parts in several requests, and what does not fit
// goes at the next round (see pieces.go).
//
// [Member.SyncStats] counts the hand-offs, the refusals, the take-overs
// and the backups sent.
//
// # Modes
//
// In [Owner] mode every check goes to the owner of its partition and waits
// for the answer: exact, at the cost of a round trip when the owner is
// another member. An owner that does not answer within Config.OwnerWait
// (by default the round trip measured to that owner plus a margin, at
// least 100 ms: stopped, paused, cut off) has the member decide the
// check itself, on its share of the policy (limit and burst divided by the
// live members), without error; the member charges what it allowed to the
// owner, or to the partition's next owner, once one answers. Config.Strict,
// or a context from [WithStrict], makes such a check wait RequestTimeout
// and fail instead. Each request carries an id the owner remembers for a
// while (at most [MaxRemembered] requests): a request sent again after its
// answer was lost is answered from the first decision, counted once, by
// the partition's next owner too when the partition was handed on
// meanwhile (a join, a graceful leave: the hand-off carries them).
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
// The owner's state of a partition has an incarnation, new each time a
// member becomes its owner. Every round, each member asks the owner of
// every partition where it holds a copy whether its incarnation changed;
// if it did (the partition moved), the member sends what it holds there
// again, in the same round: its totals for the current windows, idle ones
// too, and its copies' states whole with the hits the old owner had not
// acknowledged. The new owner keeps the union of what they know: the
// fuller of the old owner's states the members last saw, plus every
// member's hits since. So a count that the members hold never drops
// because an owner died; what the dead owner alone held since it last
// sent its backup, its own hits, can.
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
// windows: its copies, and the owner's state of the partitions it owns.
// Config.MaxCopies bounds a member's copies, and Config.MaxEntries the
// owner's state on a member, every partition it owns together (each
// partition holds MaxEntries/Partitions keys, plus an eighth, in each of
// its per-key maps). Each map evicts the idlest first: the table by its
// CLOCK, the other algorithms' copies the one hit least lately, what the
// owner charged a key whose state the table evicted, so that a flood of
// new ids never evicts an active key before an idle one. An owner that
// evicted a key's state answers with none; a member whose copy holds a
// live state keeps it and sends it whole. The resets kept for owners that
// cannot be reached are bounded by MaxQueuedResetBytes.
//
// # The network
//
// A member takes the other members' messages on Config.Host:Port, each at
// most MaxReceiveBytes. Without Config.TLS anyone who reaches that port is
// taken for a member, so Start refuses it beyond loopback unless
// Config.TrustedNetwork is set; with it, the members authenticate each
// other with mutual TLS against one CA, its files re-read when they change
// (see [TLS]). Either way every message from another member is checked whole
// before it changes anything, and one that fails is rejected, changing
// nothing, and counted in SyncStats.Rejected.
package cluster
