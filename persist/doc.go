// Package persist keeps a limiter's state in a directory, so that it
// survives a restart of the process: a snapshot of the whole state, written
// periodically and at Close, and between snapshots an append-only log of the
// records of the keys changed since the last flush.
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
// [Journal.EndSnapshot]), deciding checks between two chunks, so a snapshot
// of a million keys never stops the checks for more than a chunk. Once it
// has ended, a goroutine of its own writes and fsyncs its file, while the
// writer goes on writing and fsyncing the log on schedule; then the writer
// renames it into place. The records flushed from its beginning on go to the
// log that follows it, opened then, as well as to the current log: the
// snapshot with its log holds every change, and until it is renamed into
// place the last snapshot with its log does.
//
// # What is lost
//
// The limiter never waits for the disk: it notes which keys each check
// changed, and every Config.FlushEvery the writer goroutine asks it for
// their records (a key changed many times is written once), which it hands
// over through a buffer bounded by Config.MaxPending; the writer writes them
// in one frame, and fsyncs the log every Config.SyncEvery. A process killed
// at any moment, while a snapshot is being written or not, loses at most the
// changes of the last FlushEvery (100 ms by default) plus the time the flush
// request waits in the limiter's mailbox and the log write takes; a machine
// that crashes loses at most those of the last SyncEvery + FlushEvery (1.1 s
// by default). When the buffer is full or a write fails, records are dropped
// and counted, and the next snapshot writes the whole state again.
//
// # The directory
//
// [Journal.Load] creates the directory if missing and makes sure a file can
// be created, written, fsynced and removed in it; if not, it fails with
// [ErrUnwritable] (or, with Config.StartUnwritable, the limiter serves with
// its state in memory only, and every failed write is logged and counted).
//
// # Loading
//
// [Journal.Load] checks both files whole before it applies a record; a
// damaged or foreign file is an error wrapping [ErrCorrupt] (or, with
// Config.StartEmptyOnCorrupt, the snapshot and every log are set aside
// whole, renamed *.corrupt, for an empty start), and a log whose last write
// was cut short by a crash is applied up to that write. Only the last frame
// can be taken for a torn write, and only when its header is intact (its
// length runs past the end of the file, or its payload fails its checksum)
// or it is followed by nothing but zeros: a damaged frame header anywhere,
// or a damaged payload with more after it, is an error.
package persist
