package actorlimit

import (
	"fmt"
	"time"

	"github.com/actorlimit/actorlimit/actor"
	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/persist"
)

// PersistConfig tunes [WithPersistence]; its zero value takes the defaults:
// the log written every 100 ms, fsynced every second, a snapshot every
// minute, and an error from Start when a file is damaged or the directory
// cannot be written. A process killed at any moment, while a snapshot is
// being written or not, loses at most the changes of the last FlushEvery
// (100 ms by default) plus the time the flush request waits in the
// limiter's mailbox and the log write takes; a machine that crashes loses
// at most those of the last SyncEvery + FlushEvery (1.1 s by default). The
// package persist documents each field.
type PersistConfig = persist.Config

// WithPersistence keeps the limiter's state in dir (created if missing), so
// that it survives a restart of the process: Start loads the snapshot and
// the log of changes found there, skipping state whose window has ended, and
// the limiter then writes a snapshot every c.SnapshotEvery and at Close,
// and the records of the keys each mailbox batch changed to the log every
// c.FlushEvery, from a goroutine of its own: no check waits for the disk,
// and a snapshot is taken a chunk of keys at a time, between checks.
//
// A process killed at any moment, while a snapshot is being written or not,
// loses at most the changes of the last FlushEvery (100 ms by default) plus
// the time the flush request waits in the limiter's mailbox and the log
// write takes; a machine that crashes loses at most those of the last
// SyncEvery + FlushEvery (1.1 s by default). Start creates dir if missing
// and fails, with an error wrapping [ErrUnwritable], if it cannot create,
// write, fsync and remove a file in it, unless c.StartUnwritable (then the
// limiter serves with its state in memory only). A damaged, truncated or
// foreign file makes Start fail with an error wrapping [ErrCorrupt], unless
// c.StartEmptyOnCorrupt (then the snapshot and every log are set aside
// whole, renamed *.corrupt, and the limiter starts empty); a log whose last
// write a crash cut short is loaded up to that write. [Stats].Loaded
// reports what was loaded. Failed writes are logged and counted in Stats;
// the limiter keeps serving. Close writes a last snapshot and returns an
// error if it (or the records after it) could not be written.
//
// It needs the embedded table (or a [WithStore] store that implements
// [actor.Snapshotter]) and one shard: the hash of ids onto shards changes
// from one process to the next.
func WithPersistence(dir string, c PersistConfig) Option {
	return func(cfg *settings) error {
		if dir == "" {
			return fmt.Errorf("%w: WithPersistence: directory is empty", ErrInvalidArgument)
		}
		if err := c.Validate(); err != nil {
			return fmt.Errorf("%w: WithPersistence: %w", ErrInvalidArgument, err)
		}
		cfg.persistDir, cfg.persistCfg = dir, c
		return nil
	}
}

// journal makes the Journal of WithPersistence, once every option is in.
func (cfg *settings) journal() error {
	if cfg.shards > 1 {
		return fmt.Errorf("%w: WithPersistence with WithShards(%d): only one shard can be persisted", ErrInvalidArgument, cfg.shards)
	}
	if cfg.Store != nil {
		if _, ok := cfg.Store.(actor.Snapshotter); !ok {
			return fmt.Errorf("%w: WithPersistence: the store given to WithStore cannot be saved and loaded", ErrInvalidArgument)
		}
	}
	pc := cfg.persistCfg
	if tc, ok := cfg.Clock.(TickerClock); ok && pc.NewTicker == nil {
		pc.NewTicker = func(d time.Duration) persist.Ticker { return tc.NewTicker(d) }
	}
	if pc.Logger == nil {
		pc.Logger = cfg.Logger
	}
	j, err := persist.New(cfg.persistDir, pc)
	if err != nil {
		return fmt.Errorf("%w: WithPersistence: %w", ErrInvalidArgument, err)
	}
	cfg.Journal = &journal{Journal: j}
	return nil
}

// PersistLoaded is what Start found in [WithPersistence]'s directory,
// reported in [Stats].Loaded. The package persist documents each field.
type PersistLoaded = persist.Loaded

// journal adapts a persist.Journal to the limiter's Journal, and keeps
// what it loaded.
type journal struct {
	*persist.Journal
	loaded persist.Loaded
}

var _ actor.Journal = (*journal)(nil)

// Load implements actor.Journal.
func (j *journal) Load(now int64, apply func(algo.Record) error) error {
	ld, err := j.Journal.Load(now, apply)
	j.loaded = ld
	return err
}
