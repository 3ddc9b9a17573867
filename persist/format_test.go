package persist

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
)

// FuzzRecords decodes arbitrary bytes as a run of records, past the
// checksums that keep FuzzLoad's inputs mostly out: decoding must not
// panic, and every record it accepts must come back the same through its
// encoding (varints read may be overlong; they are written short).
func FuzzRecords(f *testing.F) {
	var b []byte
	for _, r := range []algo.Record{
		{Algorithm: algo.GCRA, Period: time.Second, ID: "a", Death: 42, State: []byte{1, 2, 3}},
		{Algorithm: algo.SlidingLog, Period: time.Hour, ID: "", Death: -1},
		{Algorithm: algo.FixedWindow, Period: 1, ID: "é", State: []byte{}},
	} {
		b = AppendRecord(b, r)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		for len(b) > 0 {
			r, n, err := readRecord(b)
			if err != nil {
				return
			}
			if n <= 0 || n > len(b) {
				t.Fatalf("size %d of %d bytes", n, len(b))
			}
			again, m, err := readRecord(AppendRecord(nil, r))
			if err != nil || m > n || again.ID != r.ID || again.Death != r.Death || again.Period != r.Period ||
				again.Algorithm != r.Algorithm || (again.State == nil) != (r.State == nil) || !bytes.Equal(again.State, r.State) {
				t.Fatalf("%+v read from %x came back as %+v (%v)", r, b[:n], again, err)
			}
			b = b[n:]
		}
	})
}

// TestRecordRoundTrip checks that nil and empty states stay apart.
func TestRecordRoundTrip(t *testing.T) {
	for _, st := range [][]byte{nil, {}, {0}} {
		in := algo.Record{Algorithm: algo.TokenBucket, Period: time.Minute, ID: "k", Death: 7, State: st}
		out, n, err := readRecord(AppendRecord(nil, in))
		if err != nil || n == 0 {
			t.Fatalf("%+v: %v", in, err)
		}
		if (out.State == nil) != (st == nil) || !bytes.Equal(out.State, st) || out.ID != in.ID || out.Death != in.Death || out.Period != in.Period || out.Algorithm != in.Algorithm {
			t.Errorf("%+v came back as %+v", in, out)
		}
	}
}

// frameLog returns a log of generation 1 whose frames hold one record per
// byte of ids, split into n frames, and where each frame starts.
func frameLog(ids []byte, n int) (log []byte, starts []int) {
	log = logHeaderOf(1)
	per := max(1, (len(ids)+n-1)/n)
	for len(ids) > 0 {
		var payload []byte
		for _, id := range ids[:min(per, len(ids))] {
			payload = AppendRecord(payload, algo.Record{Algorithm: algo.GCRA, Period: time.Second, ID: string(rune(id)), Death: 9, State: []byte{id}})
		}
		ids = ids[min(per, len(ids)):]
		starts = append(starts, len(log))
		log = appendFrame(log, payload)
	}
	return log, starts
}

// FuzzLogDamage builds a log of whole frames, changes one byte of it and,
// apart, cuts it short. The change is an error wrapping ErrCorrupt when it
// falls before the last frame's payload (a header, a length, a checksum, a
// frame with more after it); in the last payload it is what a crash
// mid-write leaves, and that frame alone is left out, as a torn tail. A
// log cut anywhere gives its whole frames and a torn tail, never an error.
func FuzzLogDamage(f *testing.F) {
	f.Add([]byte("abcdef"), uint8(2), uint32(23), byte(0x40), uint32(40))
	f.Add([]byte("a"), uint8(1), uint32(30), byte(1), uint32(22))
	f.Add([]byte("abcdefghijklmnop"), uint8(4), uint32(90), byte(0xff), uint32(0))
	f.Fuzz(func(t *testing.T, ids []byte, frames uint8, pos uint32, mask byte, cut uint32) {
		if len(ids) == 0 {
			return
		}
		log, starts := frameLog(ids, 1+int(frames%4))
		last := starts[len(starts)-1]
		if mask == 0 {
			mask = 1
		}
		i := int(pos % uint32(len(log)))
		b := bytes.Clone(log)
		b[i] ^= mask
		lc, err := parseLog(b, 1)
		switch {
		case i < last+frameHeader:
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d of %d (last frame at %d) changed: %d frames, %d torn, %v", i, len(b), last, len(lc.frames), lc.torn, err)
			}
		case err != nil || len(lc.frames) != len(starts)-1 || lc.torn != len(log)-last:
			t.Fatalf("byte %d of the last payload changed: %d frames, %d torn, %v", i, len(lc.frames), lc.torn, err)
		}

		c := int(cut % uint32(len(log)+1))
		lc, err = parseLog(log[:c], 1)
		whole, end := 0, 0
		if c >= logHeader {
			end = logHeader
		}
		for k := range starts {
			next := len(log)
			if k+1 < len(starts) {
				next = starts[k+1]
			}
			if next <= c {
				whole, end = k+1, next
			}
		}
		if err != nil || len(lc.frames) != whole || lc.torn != c-end {
			t.Fatalf("cut at %d of %d: %d frames, %d torn, %v; want %d frames, %d torn", c, len(log), len(lc.frames), lc.torn, err, whole, c-end)
		}
	})
}

// appendFrameV1 appends a frame of format version 1, as the last release
// wrote them: no checksum over the length.
func appendFrameV1(b, payload []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(payload, castagnoli))
	return append(b, payload...)
}

// logHeaderV1 returns the header of a log of format version 1.
func logHeaderV1(gen uint64) []byte {
	b := append([]byte{}, logMagic...)
	b = binary.LittleEndian.AppendUint16(b, logVersion1)
	b = binary.LittleEndian.AppendUint64(b, gen)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// TestLogVersion1 loads a directory the last release wrote, whose log is
// of format version 1: it loads (a deploy keeps the counts), with its
// rules for a torn tail, and the snapshot Start writes next is followed by
// a log of version 2. A version this build does not know is an error.
func TestLogVersion1(t *testing.T) {
	rec := func(id string) []byte {
		return AppendRecord(nil, algo.Record{Algorithm: algo.FixedWindow, Period: time.Hour, ID: id, Death: 1 << 62, State: []byte{1}})
	}
	dir := t.TempDir()
	snap := append(snapshotHeader(1, 1), rec("a")...)
	snap = binary.LittleEndian.AppendUint32(snap, crc32.Checksum(snap, castagnoli))
	logV1 := appendFrameV1(appendFrameV1(logHeaderV1(1), rec("b")), rec("c"))
	torn := appendFrameV1(nil, rec("d"))[:5]
	require.NoError(t, os.WriteFile(filepath.Join(dir, "snapshot"), snap, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, logName(1)), append(logV1, torn...), 0o600))

	j, err := New(dir, Config{})
	require.NoError(t, err)
	var ids []string
	ld, err := j.Load(0, func(r algo.Record) error { ids = append(ids, r.ID); return nil })
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, ids)
	assert.Equal(t, Loaded{Generation: 1, Records: 3, Frames: 2, TornBytes: 5}, ld)

	j.Start(func(yield func(algo.Record) bool) {}, func() {}, func() {})
	require.NoError(t, j.Close())
	b, err := os.ReadFile(filepath.Join(dir, logName(2)))
	require.NoError(t, err)
	assert.Equal(t, uint16(logVersion), binary.LittleEndian.Uint16(b[8:]), "the new log's version")

	v3 := logHeaderOf(1)
	binary.LittleEndian.PutUint16(v3[8:], 3)
	binary.LittleEndian.PutUint32(v3[logHeader-4:], crc32.Checksum(v3[:logHeader-4], castagnoli))
	_, err = parseLog(v3, 1)
	assert.ErrorIs(t, err, ErrCorrupt)
	assert.ErrorContains(t, err, "format version 3")
}

// TestLogZeroTail: a crash may leave a file extended by zeros its data
// never reached; after the whole frames, they are a torn tail, while a
// zeroed frame with data after it is damage.
func TestLogZeroTail(t *testing.T) {
	log, starts := frameLog([]byte("abcd"), 2)
	zeros := make([]byte, 40)
	lc, err := parseLog(append(bytes.Clone(log), zeros...), 1)
	require.NoError(t, err)
	assert.Len(t, lc.frames, 2)
	assert.Equal(t, len(zeros), lc.torn)

	b := append(bytes.Clone(log[:starts[1]]), zeros...)
	_, err = parseLog(append(b, log[starts[1]:]...), 1)
	assert.ErrorIs(t, err, ErrCorrupt)
}
