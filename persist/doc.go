// Package persist keeps a limiter's state in a directory, so that it
// survives a restart of the process: a snapshot of the whole state, written
// periodically and at Close, and between snapshots an append-only log of
// the records of the keys changed since the last flush.
//
// # Files
//
// "snapshot" is written to "snapshot.tmp", fsynced, renamed over the last
// one, and the directory fsynced; it carries a magic, a format version, a
// generation and a CRC-32C of the whole file. "log-<generation>" holds the
// changes made after the snapshot of that generation, one frame per write,
// whose header (its length and its payload's CRC-32C) carries a CRC-32C of
// its own, so that a damaged length is told from a write cut short (format
// version 2 of the log; version 1, without it, is still read). Each new
// snapshot starts a new log and removes the last one: the log is compacted
// into the snapshot.
//
// # Snapshots between checks
//
// The limiter hands a snapshot over a chunk of keys at a time
// ([Journal.BeginSnapshot], [Journal.SnapshotRecord],
// [Journal.EndSnapshot]), deciding checks between two chunks, so a
// snapshot of a million keys never stops the checks for more than a chunk;
// the writer writes it whole once it has ended. The records flushed from
// its beginning on go to the log that follows it, opened then, as well as
// to the current log: the snapshot with its log holds every change, and
// until it is renamed into place the last snapshot with its log does.
//
// # What is lost
//
// The limiter never waits for the disk: it notes which keys each check
// changed, and every Config.FlushEvery the writer goroutine asks it for
// their records (a key changed many times is written once), which it hands
// over through a buffer bounded by Config.MaxPending; the writer writes them
// in one frame. A process killed with SIGKILL loses what was not yet
// written: the changes of the last FlushEvery, and of the time the request
// waits in the limiter's mailbox and the write takes. A
// machine that crashes loses what was not yet fsynced: the last SyncEvery
// plus FlushEvery. When the buffer is full or a write fails, records are
// dropped and counted, and the next snapshot writes the whole state again.
//
// # Loading
//
// [Journal.Load] checks both files whole before it applies a record; a
// damaged or foreign file is an error (or, by option, set aside for an empty
// start), and a log whose last write was cut short by a crash is applied up
// to that write. Only the last frame can be taken for a torn write, and
// only when its header is intact (its length runs past the end of the file,
// or its payload fails its checksum) or it is followed by nothing but
// zeros: a damaged frame header anywhere, or a damaged payload with more
// after it, is an error.
package persist
