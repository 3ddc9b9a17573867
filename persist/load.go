package persist

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/actorlimit/actorlimit/algo"
)

// Loaded says what [Journal.Load] found.
type Loaded struct {
	// Generation is the snapshot's; 0 when there was none.
	Generation uint64
	// Records counts the records applied; Skipped those whose state had
	// died before now.
	Records, Skipped int
	// Frames counts the log's intact frames; TornBytes the bytes of a last
	// write cut short by a crash, left out.
	Frames, TornBytes int
	// Discarded is set when damaged files were set aside and the state
	// started empty (Config.StartEmptyOnCorrupt).
	Discarded bool
}

// Load reads the snapshot and the log written after it and calls apply
// with each record whose Death is after now, snapshot first, then the log
// in order (a later record of a key replaces the earlier one). Both files
// are checked whole before apply is first called, so a damaged file is
// never half-applied: a bad magic (a foreign file), an unknown version, a
// checksum mismatch, a record that does not decode, in the snapshot or in
// the log (a damaged frame header, its length included, wherever it is; a
// damaged payload with more after it), is an error wrapping [ErrCorrupt],
// or, with Config.StartEmptyOnCorrupt, a logged warning and an empty
// start. A log whose last write was cut short (a crash) is normal: its
// intact frames are applied and the torn tail is reported in Loaded and
// the log. If apply
// fails, the keys it was given are loaded again with nil State (deleted)
// and the error is handled as a damaged file's.
func (j *Journal) Load(now int64, apply func(algo.Record) error) (Loaded, error) {
	snapData, err := j.readFile("snapshot")
	if err != nil {
		return Loaded{}, err
	}
	var (
		ld      Loaded
		records []byte
		lc      logContents
	)
	if snapData != nil {
		ld.Generation, records, err = parseSnapshot(snapData)
	}
	if err == nil {
		var logData []byte
		if logData, err = j.readFile(logName(ld.Generation)); err == nil {
			lc, err = parseLog(logData, ld.Generation)
		}
	}
	if err == nil {
		err = j.apply(now, &ld, records, lc.frames, apply)
	}
	if err != nil {
		return j.corrupt(ld.Generation, err)
	}
	j.gen = ld.Generation
	ld.Frames, ld.TornBytes = len(lc.frames), lc.torn
	if lc.torn > 0 {
		j.cfg.Logger.Warn("actorlimit: persistence: the log ends in a write cut short (a crash); applied the intact frames before it",
			slog.String("dir", j.dir), slog.Int("frames", ld.Frames), slog.Int("torn_bytes", lc.torn))
	}
	j.cfg.Logger.Info("actorlimit: persistence: state loaded", slog.String("dir", j.dir),
		slog.Uint64("generation", ld.Generation), slog.Int("records", ld.Records), slog.Int("skipped", ld.Skipped))
	return ld, nil
}

// readFile returns the file's content, nil if there is none.
func (j *Journal) readFile(name string) ([]byte, error) {
	b, err := j.cfg.FS.ReadFile(j.path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("persist: %w", err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// apply gives apply every live record of the snapshot's records and the
// log's frames; if apply fails, it deletes the keys applied so far.
func (j *Journal) apply(now int64, ld *Loaded, records []byte, frames [][]byte, apply func(algo.Record) error) error {
	parts := append([][]byte{records}, frames...)
	var failed error
	applied := 0
	for _, p := range parts {
		failed = forRecords(p, func(r algo.Record) error {
			if r.Death <= now && r.State != nil {
				ld.Skipped++
				return nil
			}
			if err := apply(r); err != nil {
				return fmt.Errorf("%w: record of %q: %w", ErrCorrupt, r.ID, err)
			}
			applied++
			return nil
		})
		if failed != nil {
			break
		}
	}
	if failed == nil {
		ld.Records = applied
		return nil
	}
	undo := 0
	for _, p := range parts {
		_ = forRecords(p, func(r algo.Record) error {
			if undo == applied {
				return errStop
			}
			if r.Death <= now && r.State != nil {
				return nil
			}
			r.State = nil
			_ = apply(r)
			undo++
			return nil
		})
	}
	ld.Skipped = 0
	return failed
}

var errStop = errors.New("stop")

// corrupt handles a damaged file: it returns err, or with
// StartEmptyOnCorrupt sets the files aside, logs and starts empty.
func (j *Journal) corrupt(gen uint64, err error) (Loaded, error) {
	if !errors.Is(err, ErrCorrupt) || !j.cfg.StartEmptyOnCorrupt {
		return Loaded{}, err
	}
	for _, name := range []string{"snapshot", logName(gen)} {
		if rerr := j.cfg.FS.Rename(j.path(name), j.path(name+".corrupt")); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return Loaded{}, fmt.Errorf("persist: cannot set %s aside: %w (after: %w)", name, rerr, err)
		}
	}
	j.gen = gen
	j.cfg.Logger.Warn("actorlimit: persistence: damaged state set aside (*.corrupt); starting empty",
		slog.String("dir", j.dir), slog.Any("error", err))
	return Loaded{Generation: gen, Discarded: true}, nil
}
