package persist

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"syscall"

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
	// started empty (Config.StartEmptyOnCorrupt); SetAside names the files
	// they were renamed to.
	Discarded bool
	SetAside  []string
	// Unwritable is why the directory could not be written, when
	// Config.StartUnwritable let Load go on; nil otherwise.
	Unwritable error
}

// Load first makes sure the Journal can write to its directory: it
// creates it if missing, and creates, writes, fsyncs and removes
// "snapshot.tmp" in it (which a crash may have left behind); if it
// cannot, it returns an error wrapping [ErrUnwritable] that names the
// path and the cause, or with Config.StartUnwritable logs a warning and
// goes on.
//
// Then Load reads the snapshot and the log written after it and calls apply
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
	var ld Loaded
	if err := j.probe(); err != nil {
		if !j.cfg.StartUnwritable {
			return Loaded{}, err
		}
		ld.Unwritable = err
		j.cfg.Logger.Warn("actorlimit: persistence: the directory cannot be written; serving with the state in memory only until it can",
			slog.String("dir", j.dir), slog.Any("error", err))
	}
	snapData, err := j.readFile("snapshot")
	if err != nil {
		return Loaded{}, err
	}
	var (
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
		return j.corrupt(ld, err)
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

// readFile returns the file's content, nil if there is none (nor a
// directory to hold it).
func (j *Journal) readFile(name string) ([]byte, error) {
	b, err := j.cfg.FS.ReadFile(j.path(name))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
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

// probe creates the directory if missing and creates, writes, fsyncs and
// removes snapshot.tmp in it.
func (j *Journal) probe() error {
	fsys := j.cfg.FS
	if err := fsys.MkdirAll(j.dir); err != nil {
		return fmt.Errorf("%w %s: %w", ErrUnwritable, j.dir, err)
	}
	tmp := j.path(snapshotTmp)
	f, err := fsys.Create(tmp)
	if err == nil {
		_, err = f.Write([]byte("probe\n"))
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if rerr := fsys.Remove(tmp); err == nil {
			err = rerr
		}
	}
	if err == nil {
		err = fsys.SyncDir(j.dir)
	}
	if err != nil {
		return fmt.Errorf("%w %s: %w", ErrUnwritable, j.dir, err)
	}
	return nil
}

// corrupt handles a damaged file: it returns err, or with
// StartEmptyOnCorrupt sets aside every file of the state (the snapshot
// and every log) and starts empty, after them.
func (j *Journal) corrupt(ld Loaded, err error) (Loaded, error) {
	if !errors.Is(err, ErrCorrupt) || !j.cfg.StartEmptyOnCorrupt {
		return Loaded{}, err
	}
	aside, gen, serr := j.setAside(ld.Generation)
	if serr != nil {
		return Loaded{}, fmt.Errorf("persist: cannot set the damaged files aside: %w (after: %w)", serr, err)
	}
	j.gen = gen
	j.cfg.Logger.Warn("actorlimit: persistence: damaged state set aside; starting empty",
		slog.String("dir", j.dir), slog.Any("set_aside", aside), slog.Any("error", err))
	return Loaded{Generation: gen, Discarded: true, SetAside: aside, Unwritable: ld.Unwritable}, nil
}

// setAside renames the snapshot and every log in the directory to
// NAME.corrupt, or NAME.corrupt.N if that exists: nothing is truncated or
// overwritten. It returns the new names and the highest generation seen
// (gen, or a log's), after which the next files are numbered.
func (j *Journal) setAside(gen uint64) (aside []string, last uint64, err error) {
	names, err := j.cfg.FS.ReadDirNames(j.dir)
	if err != nil {
		return nil, 0, err
	}
	slices.Sort(names)
	taken := make(map[string]bool, len(names))
	for _, name := range names {
		taken[name] = true
	}
	last = gen
	for _, name := range names {
		g, isLog := logGeneration(name)
		if name != "snapshot" && !isLog {
			continue
		}
		last = max(last, g)
		to := name + ".corrupt"
		for i := 1; taken[to]; i++ {
			to = fmt.Sprintf("%s.corrupt.%d", name, i)
		}
		if err := j.cfg.FS.Rename(j.path(name), j.path(to)); err != nil {
			return aside, 0, err
		}
		taken[to] = true
		aside = append(aside, to)
	}
	if len(aside) > 0 {
		err = j.cfg.FS.SyncDir(j.dir)
	}
	return aside, last, err
}

// logGeneration returns the generation of the log named name, and whether
// name is a log's.
func logGeneration(name string) (uint64, bool) {
	hex, ok := strings.CutPrefix(name, "log-")
	if !ok || len(hex) != 16 {
		return 0, false
	}
	g, err := strconv.ParseUint(hex, 16, 64)
	return g, err == nil
}
