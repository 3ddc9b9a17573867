package persist

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
)

// This file is the writer goroutine's: it alone touches the files.

// run is the writer goroutine. It writes and fsyncs the log; a
// snapshot's file is written and fsynced by a goroutine of its own
// (writeSnapshotFile), so that the log's frames go on being written, to
// both logs, on schedule while it is.
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
		case err := <-j.snapDone:
			j.endSnapshot(err)
			j.flush() // the records committed meanwhile, now the new log's
		case <-sync.C():
			j.sync()
			if j.needSnap.Load() {
				j.request() // again each time, until a snapshot begins
			}
		case <-snap.C():
			j.request()
		case <-j.stop:
			j.lastErr = nil
			j.flush()
			if j.inflight {
				j.endSnapshot(<-j.snapDone)
				j.flush()
			}
			j.sync()
			for _, f := range []*File{&j.log, &j.next} {
				if *f != nil {
					j.fail("close log", (*f).Close())
					*f = nil
				}
			}
			j.closeErr = j.lastErr
			if j.snapErr != nil {
				j.closeErr = fmt.Errorf("persist: the last snapshot was not written: %w", j.snapErr)
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
	j.lastErr = fmt.Errorf("persist: %s: %w", what, err)
	j.cfg.Logger.Warn("actorlimit: persistence: "+what+" failed", slog.String("dir", j.dir), slog.Any("error", err))
	return true
}

// flush writes what the actor handed over: the records committed before a
// snapshot began to the current log; those committed since to the current
// log and to the next one; then hands the snapshot, if it has ended, to a
// goroutine that writes its file.
func (j *Journal) flush() {
	j.mu.Lock()
	pending, after, s, begun := j.pending, j.after, j.snap, j.begun
	j.pending, j.after, j.snap = nil, nil, nil
	j.writing = j.writing || s != nil
	j.mu.Unlock()
	j.writeLog(pending, false)
	if begun && j.next == nil && j.nextErr == nil {
		j.next, j.nextErr = j.openLog(j.gen + 1)
	}
	j.writeLog(after, true)
	if s != nil {
		j.writeSnapshot(s)
	}
	j.mu.Lock()
	if pending != nil {
		j.spare = pending[:0]
	}
	j.mu.Unlock()
}

// writeLog appends one frame of records to the current log and, if
// alsoNext, to the next one. After a failed write a log may end in a
// partial frame, so it is closed: the current log's records are then
// dropped until the next snapshot starts a new one, and the snapshot being
// taken, whose next log misses a frame, is not written.
func (j *Journal) writeLog(records []byte, alsoNext bool) {
	if len(records) == 0 {
		return
	}
	j.frame = appendFrame(j.frame[:0], records)
	if alsoNext && j.next != nil {
		if _, err := j.next.Write(j.frame); j.fail("log write", err) {
			_ = j.next.Close()
			j.next, j.nextErr = nil, err
		}
	}
	if j.log == nil {
		n, _ := countRecords(records)
		j.dropped.Add(uint64(n))
		j.needSnap.Store(true)
		return
	}
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
	if j.next != nil {
		j.fail("log sync", j.next.Sync())
	}
}

// writeSnapshot starts writing s, the snapshot of the next generation, to
// "snapshot.tmp", in a goroutine of its own, which reports on snapDone;
// the writer goes on writing the log meanwhile, every frame to both logs.
// Without a next log to follow it, s is given up at once.
func (j *Journal) writeSnapshot(s *snapshot) {
	j.inflight = true
	if j.next == nil {
		j.snapDone <- fmt.Errorf("the log to follow it could not be written: %w", j.nextErr)
		return
	}
	go func(fsys FS, tmp string, gen uint64) {
		j.snapDone <- writeSnapshotFile(fsys, tmp, gen, s)
	}(j.cfg.FS, j.path(snapshotTmp), j.gen+1)
}

// endSnapshot ends the snapshot whose file was written, or failed with
// err. If its file and the next log are whole, it renames the file into
// place, fsyncs the directory, makes the next log, which holds every record
// committed since the snapshot began, the current one, and removes the
// last (unless the directory's fsync failed); otherwise it keeps the current snapshot and log, removes the
// next log and the file, and has a snapshot asked for again. Either way
// the records committed meanwhile go to the current log from now on.
func (j *Journal) endSnapshot(err error) {
	j.inflight = false
	tmp, final := j.path(snapshotTmp), j.path("snapshot")
	if err == nil && j.next == nil {
		err = fmt.Errorf("the log to follow it could not be written: %w", j.nextErr)
	}
	if err == nil {
		err = j.cfg.FS.Rename(tmp, final)
	}
	// Once renamed, the snapshot is the state, with the next log after it,
	// whether or not the directory's fsync makes the rename durable; if it
	// fails, the last log is kept for a crash that would undo the rename.
	durable := err == nil && !j.fail("snapshot directory sync", j.cfg.FS.SyncDir(j.dir))
	if j.fail("snapshot write", err) {
		j.snapErr = err
		_ = j.cfg.FS.Remove(tmp)
		if j.next != nil {
			_ = j.next.Close()
			j.next = nil
		}
		_ = j.cfg.FS.Remove(j.path(logName(j.gen + 1)))
		j.needSnap.Store(true)
	} else {
		j.snapErr = nil
		j.snapshots.Add(1)
		old := j.gen
		j.gen++
		if j.log != nil {
			_ = j.log.Close()
		}
		j.log, j.next = j.next, nil
		if durable {
			_ = j.cfg.FS.Remove(j.path(logName(old))) // the new snapshot holds it
		}
		if old > 0 {
			// left behind by a crash between a rename and this removal
			_ = j.cfg.FS.Remove(j.path(logName(old - 1)))
		}
	}
	j.nextErr = nil
	j.mu.Lock()
	j.begun, j.writing = false, false
	j.pending, j.after = append(j.pending, j.after...), nil
	j.mu.Unlock()
	if j.snapshotted != nil {
		j.snapshotted()
	}
}

// openLog creates the log of generation gen, which holds the changes made
// after that generation's snapshot began.
func (j *Journal) openLog(gen uint64) (File, error) {
	f, err := j.cfg.FS.Create(j.path(logName(gen)))
	if j.fail("log create", err) {
		return nil, err
	}
	_, err = f.Write(logHeaderOf(gen))
	if err == nil {
		err = f.Sync() // a header a crash cannot take away
	}
	if err == nil {
		err = j.cfg.FS.SyncDir(j.dir)
	}
	if j.fail("log create", err) {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// writeSnapshotFile writes s, a snapshot of generation gen, to the file
// tmp, fsyncs and closes it; it removes the file if that fails. It runs in
// a goroutine of its own and touches nothing of the writer's.
func writeSnapshotFile(fsys FS, tmp string, gen uint64, s *snapshot) error {
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	err = writeSnapshotTo(f, gen, s)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = fsys.Remove(tmp)
	}
	return err
}

// writeSnapshotTo writes the file of s, a snapshot of generation gen, to
// f: its header, its records, and the checksum of both.
func writeSnapshotTo(f File, gen uint64, s *snapshot) error {
	h := snapshotHeader(gen, s.count)
	sum := crc32.Checksum(h, castagnoli)
	if _, err := f.Write(h); err != nil {
		return err
	}
	for _, b := range s.blocks {
		sum = crc32.Update(sum, castagnoli, b)
		if _, err := f.Write(b); err != nil {
			return err
		}
	}
	_, err := f.Write(binary.LittleEndian.AppendUint32(nil, sum))
	return err
}
