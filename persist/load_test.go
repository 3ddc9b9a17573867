package persist_test

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/persist"
	"github.com/actorlimit/actorlimit/table"
)

// The tests of damaged, truncated and foreign files.

// writeState leaves in dir a snapshot of a and b and a log of two frames.
func writeState(t *testing.T, dir string) {
	t.Helper()
	r, _, err := newRig(t, dir, persist.Config{})
	require.NoError(t, err)
	r.hit("a", "b")
	r.j.Snapshot(r.records())
	r.tick.tick(flushEvery)
	r.hit("a")
	r.tick.tick(flushEvery)
	r.hit("c")
	r.tick.tick(flushEvery)
	require.NoError(t, r.j.Close())
	// Close wrote nothing more: no snapshot was handed to it.
}

func logPath(t *testing.T, dir string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "log-*"))
	require.NoError(t, err)
	require.Len(t, m, 1)
	return m[0]
}

// TestTornLogTail cuts the log at every length: a cut inside the last
// frame loses that frame only, and is reported; the state is never half
// a frame.
func TestTornLogTail(t *testing.T) {
	dir := t.TempDir()
	writeState(t, dir)
	path := logPath(t, dir)
	full, err := os.ReadFile(path)
	require.NoError(t, err)
	whole, _, err := reload(t, dir, persist.Config{})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"a": 2, "b": 1, "c": 1}, whole)
	for cut := len(full) - 1; cut >= 0; cut-- {
		require.NoError(t, os.WriteFile(path, full[:cut], 0o600))
		got, ld, err := reload(t, dir, persist.Config{})
		require.NoError(t, err, "cut at %d", cut)
		// the log: a header, frame 1 (a's second hit), frame 2 (c)
		header := logHeader
		if cut < header {
			header = 0 // a header cut short: torn too
		}
		intact := []int{header, lastFrame(full)}[ld.Frames]
		switch ld.Frames {
		case 1:
			assert.Equal(t, map[string]int64{"a": 2, "b": 1}, got, "cut at %d", cut)
		case 0:
			assert.Equal(t, map[string]int64{"a": 1, "b": 1}, got, "cut at %d", cut)
		default:
			t.Fatalf("cut at %d: %d frames", cut, ld.Frames)
		}
		assert.Equal(t, cut-intact, ld.TornBytes, "cut at %d: torn bytes", cut)
	}
}

// TestDamagedFiles checks that every kind of damage is an error by default,
// and with StartEmptyOnCorrupt an empty start with the files set aside; in
// neither case is anything applied.
func TestDamagedFiles(t *testing.T) {
	flip := func(b []byte, i int) []byte { b = bytes.Clone(b); b[i] ^= 0x40; return b }
	cases := []struct {
		name   string
		file   string // "snapshot" or "log"
		mangle func(b []byte) []byte
	}{
		{"foreign snapshot", "snapshot", func([]byte) []byte { return []byte("GIF89a, not a snapshot at all....") }},
		{"truncated snapshot", "snapshot", func(b []byte) []byte { return b[:len(b)-3] }},
		{"snapshot bit flip", "snapshot", func(b []byte) []byte { return flip(b, len(b)/2) }},
		{"snapshot version", "snapshot", func(b []byte) []byte { return flip(b, 8) }},
		{"foreign log", "log", func([]byte) []byte { return []byte("#!/bin/sh\necho this is not a log\n") }},
		{"log header", "log", func(b []byte) []byte { return flip(b, 12) }},
		{"log first frame", "log", func(b []byte) []byte { return flip(b, 30+8+1) }},
		// a length that claims more than the file holds: a torn tail in
		// format 1, which dropped this frame and the intact one after it
		{"log first frame length", "log", func(b []byte) []byte { return flip(b, logHeader+1) }},
		{"log last frame length", "log", func(b []byte) []byte { return flip(b, lastFrame(b)+1) }},
		{"log last frame header checksum", "log", func(b []byte) []byte { return flip(b, lastFrame(b)+9) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeState(t, dir)
			path := filepath.Join(dir, "snapshot")
			if c.file == "log" {
				path = logPath(t, dir)
			}
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, c.mangle(b), 0o600))

			got, _, err := reload(t, dir, persist.Config{})
			require.ErrorIs(t, err, persist.ErrCorrupt)
			assert.Empty(t, got, "nothing applied")

			got, ld, err := reload(t, dir, persist.Config{StartEmptyOnCorrupt: true})
			require.NoError(t, err)
			assert.True(t, ld.Discarded)
			assert.Empty(t, got)
			_, err = os.Stat(path + ".corrupt")
			assert.NoError(t, err, "the damaged file is set aside")
		})
	}
}

// The log's layout, format version 2: a header, then frames of a 12-byte
// header (length, payload checksum, header checksum) and a payload.
const (
	logHeader   = 22
	frameHeader = 12
)

// lastFrame returns the offset of the last frame of log b.
func lastFrame(b []byte) int {
	off, last := logHeader, logHeader
	for off+frameHeader <= len(b) {
		last = off
		off += frameHeader + int(binary.LittleEndian.Uint32(b[off:]))
	}
	return last
}

// TestLogByteFlips flips every bit of a log of two frames, one at a time:
// damage before the last frame's payload is an error and nothing is
// applied; damage in the last payload is what a crash mid-write leaves, so
// that frame alone is left out, as a torn tail.
func TestLogByteFlips(t *testing.T) {
	dir := t.TempDir()
	writeState(t, dir)
	path := logPath(t, dir)
	full, err := os.ReadFile(path)
	require.NoError(t, err)
	last := lastFrame(full)
	require.Greater(t, last, logHeader, "two frames")
	for i := range full {
		for bit := range 8 {
			b := bytes.Clone(full)
			b[i] ^= 1 << bit
			require.NoError(t, os.WriteFile(path, b, 0o600))
			got, ld, err := reload(t, dir, persist.Config{})
			if i < last+frameHeader {
				require.ErrorIs(t, err, persist.ErrCorrupt, "byte %d bit %d", i, bit)
				assert.Empty(t, got, "byte %d bit %d: nothing applied", i, bit)
				continue
			}
			require.NoError(t, err, "byte %d bit %d", i, bit)
			assert.Equal(t, 1, ld.Frames, "byte %d bit %d", i, bit)
			assert.Equal(t, len(full)-last, ld.TornBytes, "byte %d bit %d", i, bit)
			assert.Equal(t, map[string]int64{"a": 2, "b": 1}, got, "byte %d bit %d", i, bit)
		}
	}
}

// FuzzLoad loads arbitrary bytes as the snapshot and as the log, and
// checks what Load does with them: an error wraps ErrCorrupt and leaves
// nothing applied; a success applies only records whose Death is after
// now (or deletes a key), counts in Loaded.Records exactly the records it applied, reports a
// torn tail no longer than the log, and is what a second Load of the same
// files gives, record for record.
func FuzzLoad(f *testing.F) {
	snap, log := seedFiles(f)
	f.Add(snap, log)
	f.Add(snap[:len(snap)-1], log)
	f.Add(snap, log[:len(log)-5])
	damaged := bytes.Clone(log)
	damaged[logHeader+1] ^= 0x40 // the first frame's length
	f.Add(snap, damaged)
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, snap, log []byte) {
		load := func() (*table.Table, []algo.Record, persist.Loaded, error) {
			mfs := newMemFS()
			mfs.set("d/snapshot", snap)
			// the log of whatever generation the snapshot claims, or 1
			mfs.set("d/log-0000000000000000", log)
			mfs.set("d/log-0000000000000001", log)
			j, err := persist.New("d", persist.Config{FS: mfs})
			require.NoError(t, err)
			tb := table.New(0)
			var applied []algo.Record
			ld, err := j.Load(t0, func(rec algo.Record) error {
				rec.State = bytes.Clone(rec.State)
				applied = append(applied, rec)
				return tb.Load(t0, rec)
			})
			return tb, applied, ld, err
		}
		tb, applied, ld, err := load()
		if err != nil {
			require.ErrorIs(t, err, persist.ErrCorrupt)
			assert.Equal(t, 0, tb.Len(), "half-applied after %v", err)
			return
		}
		for _, r := range applied {
			if r.State != nil && r.Death <= t0 {
				t.Fatalf("a record dead before now applied: %+v", r)
			}
		}
		require.Equal(t, len(applied), ld.Records, "Loaded.Records")
		require.LessOrEqual(t, tb.Len(), ld.Records)
		require.LessOrEqual(t, ld.TornBytes, len(log))
		_, again, ld2, err := load()
		require.NoError(t, err, "the second Load of the same files")
		require.Equal(t, applied, again, "the second Load of the same files")
		require.Equal(t, ld, ld2, "the second Load of the same files")
	})
}

// seedFiles returns a real snapshot and log; the log has records dead
// by t0.
func seedFiles(f *testing.F) (snap, log []byte) {
	dir := f.TempDir()
	j, err := persist.New(dir, persist.Config{})
	if err != nil {
		f.Fatal(err)
	}
	tb := table.New(0)
	for _, a := range algo.All() {
		c := algo.Check{Algorithm: a, Period: time.Hour, Limit: 10, Burst: 10, ID: "k" + a.String(), N: 2}
		tb.Apply(&c, t0)
	}
	j.Start(func(yield func(algo.Record) bool) { tb.Snapshot(t0, yield) }, func() {}, func() {})
	for _, a := range algo.All() {
		c := algo.Check{Algorithm: a, Period: time.Hour, Limit: 10, Burst: 10, ID: "k" + a.String(), N: 1}
		tb.Apply(&c, t0+int64(time.Second))
		j.Append(tb.Record(&c))
		old := c
		old.ID = "old" + a.String()
		tb.Apply(&old, t0-2*int64(time.Hour))
		j.Append(tb.Record(&old)) // dead by t0: skipped
	}
	j.Commit()
	if err := j.Close(); err != nil {
		f.Fatal(err)
	}
	snap, err = os.ReadFile(filepath.Join(dir, "snapshot"))
	if err != nil {
		f.Fatal(err)
	}
	log, err = os.ReadFile(filepath.Join(dir, "log-0000000000000001"))
	if err != nil {
		f.Fatal(err)
	}
	return snap, log
}

// TestCorruptSetAside damages the snapshot twice: each time, with
// StartEmptyOnCorrupt, the snapshot and the log of the damaged state are
// renamed, whole, to *.corrupt (a name not yet taken), the names are
// reported and logged, and the fresh state's files take new names.
func TestCorruptSetAside(t *testing.T) {
	dir := t.TempDir()
	writeState(t, dir) // a snapshot of generation 2, and its log
	kept := map[string][]byte{}
	for round, want := range [][]string{
		{"log-0000000000000002.corrupt", "snapshot.corrupt"},
		{"log-0000000000000003.corrupt", "snapshot.corrupt.1"}, // the first snapshot.corrupt stays
	} {
		logs, err := filepath.Glob(filepath.Join(dir, "log-????????????????"))
		require.NoError(t, err)
		require.Len(t, logs, 1, "round %d", round)
		logData, err := os.ReadFile(logs[0])
		require.NoError(t, err)
		snap, err := os.ReadFile(filepath.Join(dir, "snapshot"))
		require.NoError(t, err)
		snap[len(snap)/2] ^= 1
		require.NoError(t, os.WriteFile(filepath.Join(dir, "snapshot"), snap, 0o600))
		kept[want[0]], kept[want[1]] = logData, snap

		var out bytes.Buffer
		r, ld, err := newRig(t, dir, persist.Config{StartEmptyOnCorrupt: true, Logger: slog.New(slog.NewTextHandler(&out, nil))})
		require.NoError(t, err)
		assert.True(t, ld.Discarded)
		assert.Equal(t, want, ld.SetAside, "round %d", round)
		for _, name := range want {
			assert.Contains(t, out.String(), name, "logged")
		}
		r.hit("x")
		require.NoError(t, r.j.Close())
		for name, b := range kept {
			got, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err, "round %d", round)
			assert.Equal(t, b, got, "%s is kept whole, round %d", name, round)
		}
		got, _, err := reload(t, dir, persist.Config{})
		require.NoError(t, err)
		assert.Equal(t, map[string]int64{"x": 1}, got, "the fresh state, round %d", round)
	}
}
