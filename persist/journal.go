package persist

import (
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// Defaults of [Config].
const (
	// DefaultFlushEvery is how often the writer writes the records handed
	// to it: the bound on what a kill -9 loses.
	DefaultFlushEvery = 100 * time.Millisecond
	// DefaultSyncEvery is how often the log is fsynced: with
	// DefaultFlushEvery, the bound on what a machine's crash loses.
	DefaultSyncEvery = time.Second
	// DefaultSnapshotEvery is how often the whole state is written and the
	// log compacted into it.
	DefaultSnapshotEvery = time.Minute
	// DefaultMaxPending bounds the bytes of records waiting for the writer.
	DefaultMaxPending = 8 << 20
)

// Config configures a [Journal]. Zero fields take the defaults. A process
// killed at any moment, while a snapshot is being written or not, loses at
// most the changes of the last FlushEvery (100 ms by default) plus the time
// the flush request waits in the limiter's mailbox and the log write takes;
// a machine that crashes loses at most those of the last SyncEvery +
// FlushEvery (1.1 s by default).
type Config struct {
	// FlushEvery is how often the records of the batches decided since the
	// last flush are written to the log, in one write (group commit); the
	// written ones are in the operating system's cache and survive the
	// process.
	FlushEvery time.Duration
	// SyncEvery is how often the log is fsynced. A machine that crashes or
	// loses power loses at most the last SyncEvery + FlushEvery.
	SyncEvery time.Duration
	// SnapshotEvery is how often the limiter writes its whole state and
	// starts a new, empty log.
	SnapshotEvery time.Duration
	// MaxPending bounds the bytes of records handed to the writer and not
	// yet written. When a batch finds it full (a disk slower than the
	// checks), its records are dropped and counted, and a snapshot is
	// asked for, which writes them all again: the limiter never waits for
	// the disk.
	MaxPending int
	// StartEmptyOnCorrupt makes Load set aside every file of the state when
	// one is damaged or foreign (the snapshot and every log, renamed whole
	// to NAME.corrupt, or NAME.corrupt.N when that exists), log their names
	// and start empty, after their generation. By default Load returns the
	// error: starting empty would silently give every blocked client a
	// fresh limit, which is what persistence is for preventing, so an
	// operator decides.
	StartEmptyOnCorrupt bool
	// StartUnwritable makes Load log a warning and go on when the directory
	// cannot be written (see [Journal.Load]): the limiter then serves with
	// its state in memory only, counting and logging every failed write,
	// until a snapshot can be written. By default Load returns the error: a
	// limiter that believes its state is kept when nothing can be is what
	// an operator wants to hear about at once.
	StartUnwritable bool
	// FS is the file system; nil means [OS].
	FS FS
	// NewTicker makes the writer's tickers; nil means the wall clock's.
	NewTicker func(d time.Duration) Ticker
	// Logger receives load reports and write errors; nil: discard.
	Logger *slog.Logger
}

// Validate reports what is wrong with c, naming the field.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"FlushEvery", c.FlushEvery}, {"SyncEvery", c.SyncEvery}, {"SnapshotEvery", c.SnapshotEvery}} {
		if f.d < 0 {
			return fmt.Errorf("persist: %s %v is negative", f.name, f.d)
		}
	}
	if c.MaxPending < 0 || c.MaxPending > maxFrame {
		return fmt.Errorf("persist: MaxPending %d is negative or above %d, a log frame's bound", c.MaxPending, maxFrame)
	}
	return nil
}

func (c *Config) defaults() {
	if c.FlushEvery == 0 {
		c.FlushEvery = DefaultFlushEvery
	}
	if c.SyncEvery == 0 {
		c.SyncEvery = DefaultSyncEvery
	}
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = DefaultSnapshotEvery
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.FS == nil {
		c.FS = OS
	}
	if c.NewTicker == nil {
		c.NewTicker = newWallTicker
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Journal keeps one limiter's state in a directory: a snapshot, and a log
// of the changes made since. The limiter actor calls Load once, then Start,
// then Append and Commit for every flush, and BeginSnapshot,
// SnapshotRecord and EndSnapshot for a snapshot when asked; those calls
// never overlap (they are the actor's) and never wait for the disk: a
// writer goroutine of the Journal's own does the writing. Close ends it.
//
// # A snapshot taken between checks
//
// The limiter takes a snapshot a chunk of keys at a time, deciding checks
// between two chunks, so a snapshot holds each key as it was at some
// moment after BeginSnapshot, not all at one instant. It is made whole by
// the log that follows it: every record committed after BeginSnapshot
// goes to that log, which the writer opens then, as well as to the current
// one. A key's last record in the new log is its state at the last flush
// that found it changed, later than its record in the snapshot or equal
// to it; a key changed after its last flush is one a kill loses anyway.
// Until the snapshot is renamed into place the current log still gets
// every record, and its file is written and fsynced by a goroutine of its
// own while the writer goes on writing the log, so a process killed while
// a snapshot is being taken or written loses no more than at any other
// time.
type Journal struct {
	dir string
	cfg Config

	// the actor's
	batch    []byte    // the records of the current flush
	nBatch   int       // how many
	building *snapshot // the snapshot between BeginSnapshot and EndSnapshot

	// handed from the actor to the writer
	mu      sync.Mutex
	pending []byte    // records for the current log
	after   []byte    // records committed since a snapshot began: for both logs
	begun   bool      // a snapshot began and is not yet written (or given up)
	snap    *snapshot // a snapshot ended, not yet taken by the writer
	writing bool      // the writer took a snapshot and it is not yet in place
	spare   []byte    // a buffer the writer gave back

	// the writer's
	gen      uint64
	log      File  // the current generation's log
	next     File  // the next generation's, from the moment a snapshot begins
	nextErr  error // why next could not be made or written: the snapshot is not written
	inflight bool  // a snapshot's file is being written, and will be reported on snapDone
	frame    []byte
	snapErr  error  // why the last snapshot was not written; nil once one is
	lastErr  error  // the last failure, for Close
	closeErr error  // what Close returns
	request  func() // asks the limiter for a snapshot
	askKeys  func() // asks the limiter for the keys changed since the last flush

	snapshotted func() // a test's hook: a snapshot ended, written or not

	needSnap atomic.Bool // something was dropped: a snapshot begun later covers it
	snapDone chan error  // the end of writing a snapshot's file: nil, or why it failed
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	frames, snapshots, errs, dropped atomic.Uint64
}

// snapshot is a snapshot's records, being encoded or waiting to be
// written. They are kept in blocks of about snapBlock bytes, not in one
// buffer, so that adding a chunk's records never copies the records
// before them.
type snapshot struct {
	blocks [][]byte
	count  int
}

// snapBlock is the size of a snapshot's blocks.
const snapBlock = 1 << 20

func (s *snapshot) add(r algo.Record) {
	n := len(s.blocks)
	if n == 0 || len(s.blocks[n-1]) >= snapBlock {
		s.blocks = append(s.blocks, make([]byte, 0, snapBlock+snapBlock/16))
		n++
	}
	s.blocks[n-1] = AppendRecord(s.blocks[n-1], r)
	s.count++
}

// New returns a Journal on dir, after checking cfg; it touches no file:
// Load creates dir if missing.
func New(dir string, cfg Config) (*Journal, error) {
	if dir == "" {
		return nil, errors.New("persist: directory is empty")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	return &Journal{
		dir:      dir,
		cfg:      cfg,
		kick:     make(chan struct{}, 1),
		snapDone: make(chan error, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}, nil
}

func (j *Journal) path(name string) string { return filepath.Join(j.dir, name) }

func logName(gen uint64) string { return fmt.Sprintf("log-%016x", gen) }

// snapshotTmp is the file a snapshot is written to before it is renamed
// into place.
const snapshotTmp = "snapshot.tmp"

// Append adds r to the records of the current flush. The limiter calls it,
// when asked, for every key changed since the last flush; r.State is
// copied.
func (j *Journal) Append(r algo.Record) {
	j.batch = AppendRecord(j.batch, r)
	j.nBatch++
}

// Commit hands the current flush's records to the writer, which writes
// them in one frame (a group commit), to the current log and, while a
// snapshot is being taken or written, to the log that follows it. If
// MaxPending bytes are already waiting it drops them instead, counts them
// and asks for a snapshot; it never blocks on I/O.
func (j *Journal) Commit() {
	if j.nBatch == 0 {
		return
	}
	j.mu.Lock()
	dst := &j.pending
	if j.begun {
		dst = &j.after
	}
	if len(j.pending)+len(j.after)+len(j.batch) > j.cfg.MaxPending {
		j.mu.Unlock()
		j.dropped.Add(uint64(j.nBatch))
		j.needSnap.Store(true)
	} else {
		if *dst == nil && j.spare != nil {
			*dst, j.spare = j.spare[:0], nil
		}
		*dst = append(*dst, j.batch...)
		j.mu.Unlock()
	}
	j.batch, j.nBatch = j.batch[:0], 0
	j.wake()
}

// wake tells the writer there is something to write.
func (j *Journal) wake() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// BeginSnapshot starts a snapshot of the whole state, which the limiter
// gives a chunk at a time, deciding checks in between, with
// SnapshotRecord, and hands to the writer with EndSnapshot; the records
// committed from now on go to the log that will follow it as well. A
// snapshot begun and not ended, or ended and not yet taken by the writer,
// is given up for this one. It reports false, and no snapshot begins,
// while the writer is still writing the last one.
func (j *Journal) BeginSnapshot() bool {
	j.mu.Lock()
	if j.writing {
		j.mu.Unlock()
		return false
	}
	j.begun, j.snap = true, nil
	j.mu.Unlock()
	j.needSnap.Store(false) // this snapshot covers whatever was dropped so far
	j.building = &snapshot{}
	return true
}

// SnapshotRecord adds r to the snapshot begun; r.State is copied.
func (j *Journal) SnapshotRecord(r algo.Record) {
	if j.building != nil {
		j.building.add(r)
	}
}

// EndSnapshot hands the snapshot begun to the writer, which writes it and
// makes the log that follows it the current one.
func (j *Journal) EndSnapshot() {
	s := j.building
	if s == nil {
		return
	}
	j.building = nil
	j.mu.Lock()
	j.snap = s
	j.mu.Unlock()
	j.wake()
}

// Snapshot takes a snapshot of records, the store's whole state, at once:
// BeginSnapshot, SnapshotRecord for each, EndSnapshot. It reports false,
// as BeginSnapshot does, while the writer is still writing the last one.
func (j *Journal) Snapshot(records iter.Seq[algo.Record]) bool {
	if !j.BeginSnapshot() {
		return false
	}
	for r := range records {
		j.SnapshotRecord(r)
	}
	j.EndSnapshot()
	return true
}

// Start writes the state just loaded as a new snapshot, with a new, empty
// log after it (so a torn tail is never appended to), and starts the
// writer. The writer calls flush every FlushEvery, to ask the limiter for
// the keys changed since the last flush (Append, Commit), and snapshot
// every SnapshotEvery, and every SyncEvery after records were dropped, to
// ask for the whole state; both only send the limiter a message. A failure
// to write the first snapshot is logged and counted, as later ones are:
// the files of the last run stay as they were.
func (j *Journal) Start(records iter.Seq[algo.Record], snapshot, flush func()) {
	j.request, j.askKeys = snapshot, flush
	j.Snapshot(records)
	<-j.kick
	j.flush()
	j.endSnapshot(<-j.snapDone)
	go j.run(j.cfg.NewTicker(j.cfg.FlushEvery), j.cfg.NewTicker(j.cfg.SyncEvery), j.cfg.NewTicker(j.cfg.SnapshotEvery))
}

// Stats counts what the Journal did.
type Stats struct {
	// Frames counts the log writes, Snapshots the snapshots written.
	Frames, Snapshots uint64
	// Errors counts failed writes, syncs, renames.
	Errors uint64
	// Dropped counts the records not written: the queue was full, or the
	// log was unusable after a failed write. The next snapshot that is
	// written covers them.
	Dropped uint64
}

// Stats returns the Journal's counts; it is safe for concurrent use.
func (j *Journal) Stats() Stats {
	return Stats{
		Frames: j.frames.Load(), Snapshots: j.snapshots.Load(),
		Errors: j.errs.Load(), Dropped: j.dropped.Load(),
	}
}

// Failures returns how many writes failed and how many records were
// dropped so far; it is safe for concurrent use.
func (j *Journal) Failures() (errors, dropped uint64) {
	return j.errs.Load(), j.dropped.Load()
}

// Close writes what was handed to the writer (EndSnapshot first for a
// final snapshot), fsyncs and closes the log, and stops the writer. It
// returns an error if the last snapshot could not be written, or the
// records handed after it could not be written and fsynced: the state in
// the directory is then older than the limiter's. It is idempotent.
func (j *Journal) Close() error {
	j.stopOnce.Do(func() {
		close(j.stop)
		if j.request == nil { // never started
			close(j.done)
		}
	})
	<-j.done
	return j.closeErr
}
