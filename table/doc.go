// Package table is the limiter's ordered store and its window arithmetic.
//
// A [Table] keeps one [Entry] per limit state, in the manner of the Erlang
// raterlimiter's ordered ETS table: <bucketNum, id> -> <count, created,
// modified>, created and modified in Unix milliseconds as in the original
// (window lengths and bucket arithmetic are in nanoseconds, so that a
// millisecond scale gives the original's buckets and finer periods are
// possible). Entries are ordered by [Key.Kind]
// and [Key.Scale] (the window length), then by bucket number, then by id, so
// that every window length has its own run of the order and the same id under
// two window lengths is two entries (the original keyed rows by
// {BucketNumber, Id} alone, so bucket 5 of a 1 s scale was bucket 5 of a 5 s
// scale; here they are apart).
//
// # Layout
//
// The B-tree holds the order; a hash index beside it maps each Key to its
// entry, so a hit on a live entry touches no tree node at all. An entry holds
// the state of the newest window its id has used: when a hit arrives in a later
// window, the entry is moved forward to that window (its old count is dead by
// definition of a fixed window) instead of leaving the old row behind for the
// janitor. The order therefore still says, for every window length, which
// entries belong to the oldest windows.
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
// before an insert that would pass it, the entry of the oldest window (the
// earliest window start, whatever its length) is evicted and counted.
//
// # Concurrency
//
// A Table is a plain data structure: it starts no goroutines, never reads the
// clock (every method that needs the time takes now), and is not safe for
// concurrent use. In actorlimit it is owned by one actor, which is the only
// code that touches it.
package table
