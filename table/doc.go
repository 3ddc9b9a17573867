// Package table is the limiter's ordered store: it keeps each key's state,
// finds it, files it in order and deletes it; the algorithms that decide
// hits against that state are pure functions of package algo.
//
// A [Table] keeps one [Entry] per limit state, in the manner of the Erlang
// raterlimiter's ordered ETS table: <bucketNum, id> -> <count, created,
// modified>, created and modified in Unix milliseconds as in the original
// (window lengths and bucket arithmetic are in nanoseconds, so that a
// millisecond scale gives the original's buckets and finer periods are
// possible). Entries are ordered by [Key.Kind] and [Key.Scale] (the window
// length), then by bucket number, then by id, so that every window length has
// its own run of the order and the same id under two window lengths is two
// entries (the original keyed rows by
// {BucketNumber, Id} alone, so bucket 5 of a 1 s scale was bucket 5 of a 5 s
// scale; here they are apart).
//
// # Layout
//
// An entry is a node of 48 bytes in a slab of fixed chunks, named by a
// 32-bit number and holding no pointer (so the garbage collector never
// scans the slab): its window, its state packed in 12 bytes relative to
// that window (a state that does not fit is kept whole beside it, see
// "Packed states" below), the links of the eviction ring, and its id when
// the id has at most 16 bytes (a longer id is a string the node names by
// number). A hash index finds a key's node: open
// addressing over 32-bit slots, each a node number and a tag of the key's
// hash, under a seed of the table's own, and a probe compares the id's
// bytes, so ids an attacker picks neither collide more than others nor get
// mixed up when they do; the index is cut into parts of at most 4096
// slots that split as it grows (extendible hashing), so no insert rehashes
// more than one part. A hit on a live entry is thus one index slot and one
// node, and touches no tree node at all; [Table.Decide] reads the slots
// and nodes of a whole batch first, so that in a large table their reads
// from memory overlap. Each kind and window length
// (a group) has its own run of the order: a B-tree of its node numbers by
// bucket, then id. Deleted nodes and long ids' slots are reused by the
// next inserts. An entry holds the state of the newest window its id has used:
// when a hit arrives in a later window, the entry is moved forward to that
// window (its old count is dead by definition of a fixed window) instead of
// leaving the old row behind for the janitor. Each tree therefore starts
// with the entries of its oldest windows, and a sweep takes them from its
// left edge, the cheapest place to delete from.
//
// # Algorithms and their entries
//
// Each algorithm has its own Kind, so its entries form their own runs of the
// order; the caller (the limiter actor) chooses the Kind values, and
// [Table.Apply] uses the [algo.Algorithm] of the check. The algorithms
// themselves are pure functions in package algo, over a typed state per
// algorithm ([algo.FixedState], [algo.BucketState], [algo.SlotState]) with
// no tree code in them: for a hit the table finds the entry (one index
// lookup), gives the function the entry's state, and files the entry anew
// only when the function says the state changed and its death moved to
// another bucket. Every algorithm keeps one entry per key, filed under a
// Bucket whose end, (Bucket+1)*Scale, is at or after the time the key's
// state is back to full capacity (its death), and less than one Scale after
// it: an expired entry is exactly an entry with nothing left to remember,
// and [Table.Expire] stays a range scan for every algorithm. A move takes
// the entry out of the tree and puts it back, which happens at most about
// once per Scale of elapsed time a key, so a hit is mostly one index lookup.
// Peeks change nothing.
//
// The entry's words hold the typed states as follows:
//
//   - Fixed window ([Table.FixedWindow], [algo.FixedWindowHit]): Bucket is
//     the window, Count its hits, Created and Modified Unix ms.
//   - GCRA, token bucket and leaky bucket ([Table.GCRA],
//     [Table.TokenBucket], [Table.LeakyBucket]) share [algo.BucketState]:
//     the time F at which the bucket will be empty again (GCRA's
//     theoretical arrival time; for a token bucket, the time it will be
//     full of tokens again), kept exactly as Empty + Frac/Rate ns, where
//     Rate is the Limit of the last update, so that T = Period/Limit needs
//     no rounding even below a nanosecond. The entry keeps Empty in
//     Modified, Frac in Created and Rate in Count: one number per key,
//     nothing else; the death is F. Under a changed Limit the bucket keeps
//     the hits it holds, which drain at the new rate from the first hit
//     (allowed or not) made under it.
//   - Sliding window and sliding log ([Table.SlidingWindow],
//     [Table.SlidingLog]) share [algo.SlotState]: hits per slot, Period/60
//     for the window, one millisecond for the log. The non-empty slots
//     still counted (at most 61 for the window; for the log, one per
//     millisecond with hits, so at most Limit) are [algo.Pairs] that hang
//     off the entry in a side map from entry to pairs: a byte buffer of
//     (slot gap, count) pairs in varints, oldest first: one byte for a slot
//     right after the previous one with up to 33 hits, three for a lone hit
//     minutes after the previous one. Count is the sum of the counts kept,
//     Created the slot before the oldest pair (Base), Modified the newest
//     slot (Newest); the death is the end of the newest slot's last window.
//     Fixed-window entries pay nothing for it: the side map holds only the
//     entries that have pairs.
//
// # Packed states
//
// A node keeps the three words of its state (Count, Created, Modified)
// in 12 bytes, as numbers relative to the start of its window: for a
// fixed window the count in 32 bits and the two times in milliseconds
// from the window's start, for the buckets Empty's nanoseconds from the
// bucket's start and Frac and Rate in the bits the run's scale leaves,
// for the sliding algorithms the count and the two slots from the
// window's first slot. A state whose words do not fit (a count past 2^32,
// a clock stepped back days, a fixed window longer than 37 days, a bucket
// Limit of more than 2^26 at a scale of an hour, 2^24 at a day) is kept
// whole, three int64 words, in a wide state the node names by number, and
// goes back into the node when it fits again: nothing is rounded, only a
// key whose state does not fit costs 24 bytes more. A hit unpacks the
// words, runs the algorithm and packs them again: a few shifts and adds.
//
// # Snapshots
//
// [Table.Snapshot], [Table.SnapshotChunk] (the same, a chunk of entries at a
// time), [Table.Record] and [Table.Load] write each key's state out as an
// [algo.Record] and read it back, so that it survives a restart (the
// limiter actor's Snapshotter contract). A record's State is the typed
// state in algo's versioned binary encoding ([algo.StateVersion]); Load
// decodes and checks it before it changes anything, and ignores records
// already dead.
//
// # Deleting old entries
//
// [Table.Expire] deletes entries whose window ended more than a timeout ago.
// For each window length it walks the order from the oldest bucket up to the
// first live one and stops there, so its cost grows with what it deletes, not
// with what stays. It deletes at most a given number of entries a call, so a
// caller can bound how long one call takes.
//
// # Memory bound
//
// A table made with a positive limit never holds more entries than that:
// before an insert that would pass it, one entry is evicted and counted
// ([Table.Evictions]). Which one does not depend on ids, windows or kinds,
// so a flood of new ids cannot choose its victim: the table evicts what has
// been idle longest, by a second-chance CLOCK. Every entry is on a ring,
// with a hand that points at the next candidate; a new entry goes in just
// behind the hand, with no chance; a hit on an existing entry (allowed or
// denied, by any algorithm, but not a peek) gives it one chance, or three
// when the hit is denied, since the state of a key being held back is what
// a limiter most needs to keep; to make room the hand takes one chance from
// each entry it passes and evicts the first with none left.
//
// So the hand evicts only an entry it has passed before with no hit since:
// an entry hit at least once per turn of the hand keeps its state, and one
// hit just now is evicted only if every other entry of the table has been
// hit since the hand last passed it. A turn of the hand is one step per
// entry, and each step either evicts (an insert pays for it) or spends a
// chance some hit earned. In a full table of idle entries, as under a flood
// of new ids each hit once, a turn is limit new ids, and "rarely" means
// this: an entry keeps its state if hit at least once while the table takes
// limit new ids, a denying one (its last hit denied) if hit at least once
// while it takes 3*limit. Hits on other entries make turns shorter, by one
// insert per chance they earn.
//
// The ring costs each entry two node numbers, 56 bits, and two bits of
// chances. A hit writes one byte of its own entry; an insert into a full
// table costs amortised O(1) steps of the hand (each either evicts or spends
// a chance some hit gave) and the victim's O(log n) tree delete; Delete and
// Expire take entries off the ring in O(1). A table with no bound keeps no
// ring.
//
// # Saving and loading
//
// [Table.Snapshot], [Table.Record] and [Table.Load] write an entry out as an
// algo.Record and read it back (the limiter actor's Snapshotter contract),
// so that the state survives a restart of the process. The record's State
// is the entry's fields in varints, and for the sliding window and log the
// live (gap, count) pairs, behind a version byte; Load checks all of it
// against its algorithm's rules before it changes anything.
//
// # Concurrency
//
// A Table is a plain data structure: it starts no goroutines, never reads the
// clock (every method that needs the time takes now), and is not safe for
// concurrent use. In actorlimit it is owned by one actor, which is the only
// code that touches it.
package table
