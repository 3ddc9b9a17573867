package persist

import (
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
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

// Config configures a [Journal]. Zero fields take the defaults.
type Config struct {
	// FlushEvery is how often the records of the batches decided since the
	// last flush are written to the log, in one write (group commit). A
	// process killed with SIGKILL loses the changes of at most the last
	// FlushEvery (plus a write under way); the written ones are in the
	// operating system's cache and survive the process.
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
	// StartEmptyOnCorrupt makes Load log a warning, set the damaged files
	// aside (renamed to *.corrupt) and start empty when a file is damaged
	// or foreign. By default Load returns the error: starting empty would
	// silently give every blocked client a fresh limit, which is what
	// persistence is for preventing, so an operator decides.
	StartEmptyOnCorrupt bool
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
// then Append and Commit for every batch and Snapshot when asked; those
// calls never overlap (they are the actor's) and never wait for the disk:
// a writer goroutine of the Journal's own does the writing. Close ends it.
type Journal struct {
	dir string
	cfg Config

	// the actor's: the records of the current batch
	batch  []byte
	nBatch int

	// handed from the actor to the writer
	mu      sync.Mutex
	pending []byte    // records for the current log
	snap    *snapshot // a snapshot to write, nil if none
	after   []byte    // records for the log that follows snap
	spare   []byte    // a buffer the writer gave back
	lastLen int       // the size of the last snapshot, to size the next

	// the writer's
	gen     uint64
	log     File
	frame   []byte
	request func() // asks the limiter for a snapshot
	askKeys func() // asks the limiter for the keys changed since the last flush

	needSnap atomic.Bool
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	frames, snapshots, errs, dropped atomic.Uint64
}

// snapshot is a snapshot file's content waiting to be written.
type snapshot struct {
	buf   []byte // header room, then the records
	count int
}

// New returns a Journal on dir, which must exist, after checking cfg.
func New(dir string, cfg Config) (*Journal, error) {
	if dir == "" {
		return nil, errors.New("persist: directory is empty")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	if _, isOS := cfg.FS.(osFS); isOS {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("persist: %w", err)
		}
	}
	return &Journal{
		dir:  dir,
		cfg:  cfg,
		kick: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}, nil
}

func (j *Journal) path(name string) string { return filepath.Join(j.dir, name) }

func logName(gen uint64) string { return fmt.Sprintf("log-%016x", gen) }

// Append adds r to the records of the current flush. The limiter calls it,
// when asked, for every key changed since the last flush; r.State is
// copied.
func (j *Journal) Append(r algo.Record) {
	j.batch = AppendRecord(j.batch, r)
	j.nBatch++
}

// Commit hands the current flush's records to the writer, which writes
// them in one frame (a group commit). If MaxPending bytes are already
// waiting it drops them instead, counts them and asks for a snapshot; it
// never blocks on I/O.
func (j *Journal) Commit() {
	if j.nBatch == 0 {
		return
	}
	j.mu.Lock()
	dst := &j.pending
	if j.snap != nil {
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

// Snapshot encodes every record of records, the store's whole state, and
// hands it to the writer, which writes it and starts a new log. The
// records committed before it go to the current log, those committed
// after it to the new one; a snapshot not yet written when the next comes
// is replaced by it.
func (j *Journal) Snapshot(records iter.Seq[algo.Record]) {
	j.mu.Lock()
	size := j.lastLen
	j.mu.Unlock()
	s := &snapshot{buf: newSnapshotBuffer(size + size/8)}
	for r := range records {
		s.buf = AppendRecord(s.buf, r)
		s.count++
	}
	j.mu.Lock()
	j.snap, j.after, j.lastLen = s, nil, len(s.buf)
	j.mu.Unlock()
	j.wake()
}

// Start writes the state just loaded as a new snapshot, with a new, empty
// log after it (so a torn tail is never appended to), and starts the
// writer. The writer calls flush every FlushEvery, to ask the limiter for
// the keys changed since the last flush (Append, Commit), and snapshot
// every SnapshotEvery, and after a write failed, to ask for the whole
// state; both only send the limiter a message. A failure to write the
// first snapshot is logged and counted, as later ones are: the files of
// the last run stay as they were.
func (j *Journal) Start(records iter.Seq[algo.Record], snapshot, flush func()) {
	j.request, j.askKeys = snapshot, flush
	j.Snapshot(records)
	<-j.kick
	j.flush()
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

// Close writes what was handed to the writer (Snapshot first for a final
// snapshot), fsyncs and closes the log, and stops the writer. It is
// idempotent.
func (j *Journal) Close() error {
	j.stopOnce.Do(func() {
		close(j.stop)
		if j.request == nil { // never started
			close(j.done)
		}
	})
	<-j.done
	return nil
}

// run is the writer goroutine.
func (j *Journal) run(flush, sync, snap Ticker) {
	defer close(j.done)
	defer flush.Stop()
	defer sync.Stop()
	defer snap.Stop()
	for {
		select {
		case <-flush.C():
			j.askKeys()
			j.flush() // what was committed since the last write, if anything
		case <-j.kick:
			j.flush()
		case <-sync.C():
			j.sync()
			if j.needSnap.CompareAndSwap(true, false) {
				j.request()
			}
		case <-snap.C():
			j.request()
		case <-j.stop:
			j.flush()
			j.sync()
			if j.log != nil {
				j.fail("close log", j.log.Close())
				j.log = nil
			}
			return
		}
	}
}

// fail counts and logs err, if any, and reports whether there was one.
func (j *Journal) fail(what string, err error) bool {
	if err == nil {
		return false
	}
	j.errs.Add(1)
	j.cfg.Logger.Warn("actorlimit: persistence: "+what+" failed", slog.String("dir", j.dir), slog.Any("error", err))
	return true
}

// flush writes what the actor handed over: the records for the current
// log, then a snapshot and the new log with the records that follow it.
func (j *Journal) flush() {
	j.mu.Lock()
	pending, s, after := j.pending, j.snap, j.after
	j.pending, j.snap, j.after = nil, nil, nil
	j.mu.Unlock()
	j.writeLog(pending)
	if s != nil && !j.writeSnapshot(s) {
		j.needSnap.Store(true)
	}
	j.writeLog(after)
	j.mu.Lock()
	if pending != nil {
		j.spare = pending[:0]
	}
	j.mu.Unlock()
}

// writeLog appends one frame of records to the log. After a failed write
// the log may end in a partial frame, so it is closed and records are
// dropped until the next snapshot starts a new one.
func (j *Journal) writeLog(records []byte) {
	if len(records) == 0 {
		return
	}
	if j.log == nil {
		n, _ := countRecords(records)
		j.dropped.Add(uint64(n))
		j.needSnap.Store(true)
		return
	}
	j.frame = appendFrame(j.frame[:0], records)
	if _, err := j.log.Write(j.frame); j.fail("log write", err) {
		_ = j.log.Close()
		j.log = nil
		n, _ := countRecords(records)
		j.dropped.Add(uint64(n))
		j.needSnap.Store(true)
		return
	}
	j.frames.Add(1)
}

func (j *Journal) sync() {
	if j.log != nil {
		j.fail("log sync", j.log.Sync())
	}
}

// writeSnapshot writes s as the snapshot of the next generation (a
// temporary file, fsync, rename, fsync of the directory), then opens that
// generation's log and removes the last one. It reports whether the
// snapshot was written; if it was not, the last snapshot and log stay.
func (j *Journal) writeSnapshot(s *snapshot) bool {
	gen := j.gen + 1
	tmp, final := j.path("snapshot.tmp"), j.path("snapshot")
	f, err := j.cfg.FS.Create(tmp)
	if j.fail("snapshot create", err) {
		return false
	}
	data := encodeSnapshot(s.buf, gen, s.count)
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = j.cfg.FS.Rename(tmp, final)
	}
	if err == nil {
		err = j.cfg.FS.SyncDir(j.dir)
	}
	if j.fail("snapshot write", err) {
		_ = j.cfg.FS.Remove(tmp)
		return false
	}
	j.snapshots.Add(1)
	old := j.gen
	j.gen = gen
	if j.log != nil {
		_ = j.log.Close()
		j.log = nil
	}
	_ = j.cfg.FS.Remove(j.path(logName(old))) // the new snapshot holds it
	if old > 0 {
		// left behind by a crash between a rename and this removal
		_ = j.cfg.FS.Remove(j.path(logName(old - 1)))
	}
	j.openLog()
	return true
}

// openLog creates the log of the current generation. Without one, records
// are dropped until the next snapshot tries again.
func (j *Journal) openLog() {
	f, err := j.cfg.FS.Create(j.path(logName(j.gen)))
	if j.fail("log create", err) {
		j.needSnap.Store(true)
		return
	}
	_, err = f.Write(logHeaderOf(j.gen))
	if err == nil {
		err = j.cfg.FS.SyncDir(j.dir)
	}
	if j.fail("log create", err) {
		_ = f.Close()
		j.needSnap.Store(true)
		return
	}
	j.log = f
}

// Failures returns how many writes failed and how many records were
// dropped so far; it is safe for concurrent use.
func (j *Journal) Failures() (errors, dropped uint64) {
	return j.errs.Load(), j.dropped.Load()
}
