package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// The files. Integers are little-endian; every checksum is CRC-32C
// (Castagnoli).
//
// A snapshot ("snapshot"), format version 1, is written whole and renamed
// into place:
//
//	magic "ALSNAP\x00\x01" | version u16 | generation u64 | records u64
//	records...
//	crc u32 of all that precedes it
//
// A log ("log-<generation in 16 hex digits>"), format version 2, holds the
// changes made after the snapshot of its generation, appended one frame per
// write:
//
//	magic "ALLOG\x00\x00\x01" | version u16 | generation u64 | crc u32 of the header
//	frame: length u32 | crc u32 of the payload | crc u32 of the 8 bytes before it | payload (records)
//
// The frame header's own checksum tells a damaged length from a write cut
// short: a length is trusted only when its header is intact. Version 1 of
// the log, still read, had no header checksum (frame: length u32 | crc u32
// of the payload | payload), so a damaged length read as a torn tail.
//
// A record:
//
//	algorithm u8 | period uvarint | id length uvarint | id | death varint |
//	state length + 1 uvarint (0: nil state) | state
const (
	snapVersion = 1
	logVersion  = 2
	// logVersion1 is the log of format version 1, read but not written.
	logVersion1   = 1
	snapMagic     = "ALSNAP\x00\x01"
	logMagic      = "ALLOG\x00\x00\x01"
	snapHeader    = 8 + 2 + 8 + 8
	logHeader     = 8 + 2 + 8 + 4
	frameHeader   = 4 + 4 + 4
	frameHeaderV1 = 4 + 4
	// maxID bounds an id's length in a file: a larger one is corruption.
	maxID = 1 << 16
	// maxFrame bounds one frame's payload, and so Config.MaxPending.
	maxFrame = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// The errors of [Journal.Load].
var (
	// ErrCorrupt is wrapped by the errors of a file that is not a whole,
	// intact file of this format: a bad magic (a foreign file), an unknown
	// version, a bad checksum (a log frame's header, a payload with more
	// after it), a record that does not decode.
	ErrCorrupt = errors.New("persist: corrupt file")
	// ErrUnwritable is wrapped by the error of a directory in which the
	// Journal cannot create, write, fsync and remove a file.
	ErrUnwritable = errors.New("persist: cannot write to directory")
)

// AppendRecord appends r's encoding to b.
func AppendRecord(b []byte, r algo.Record) []byte {
	b = append(b, byte(r.Algorithm))
	b = binary.AppendUvarint(b, uint64(r.Period))
	b = binary.AppendUvarint(b, uint64(len(r.ID)))
	b = append(b, r.ID...)
	b = binary.AppendVarint(b, r.Death)
	if r.State == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(r.State))+1)
	return append(b, r.State...)
}

// readRecord decodes the record at the start of b and returns its size.
// The record's ID and State point into b.
func readRecord(b []byte) (algo.Record, int, error) {
	var r algo.Record
	if len(b) < 1 {
		return r, 0, errors.New("truncated record")
	}
	r.Algorithm = algo.Algorithm(b[0])
	off := 1
	period, n := binary.Uvarint(b[off:])
	if n <= 0 || period == 0 || period > 1<<63-1 {
		return r, 0, errors.New("bad period")
	}
	r.Period, off = time.Duration(period), off+n
	idLen, n := binary.Uvarint(b[off:])
	if n <= 0 || idLen > maxID || uint64(len(b)-off-n) < idLen {
		return r, 0, errors.New("bad id")
	}
	off += n
	r.ID, off = string(b[off:off+int(idLen)]), off+int(idLen)
	death, n := binary.Varint(b[off:])
	if n <= 0 {
		return r, 0, errors.New("bad death")
	}
	r.Death, off = death, off+n
	stLen, n := binary.Uvarint(b[off:])
	if n <= 0 || stLen > uint64(len(b)-off-n)+1 {
		return r, 0, errors.New("bad state")
	}
	off += n
	if stLen > 0 {
		r.State, off = b[off:off+int(stLen-1):off+int(stLen-1)], off+int(stLen-1)
	}
	if !r.Algorithm.Known() {
		return r, 0, fmt.Errorf("unknown algorithm %d", r.Algorithm)
	}
	return r, off, nil
}

// forRecords calls fn with every record of b, which must hold whole
// records, stopping at fn's first error.
func forRecords(b []byte, fn func(algo.Record) error) error {
	for len(b) > 0 {
		r, n, err := readRecord(b)
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// countRecords checks that b holds whole records and returns how many.
func countRecords(b []byte) (int, error) {
	n := 0
	err := forRecords(b, func(algo.Record) error { n++; return nil })
	return n, err
}

// snapshotHeader returns the header of the snapshot file of generation
// gen that holds count records.
func snapshotHeader(gen uint64, count int) []byte {
	b := make([]byte, 0, snapHeader)
	b = append(b, snapMagic...)
	b = binary.LittleEndian.AppendUint16(b, snapVersion)
	b = binary.LittleEndian.AppendUint64(b, gen)
	return binary.LittleEndian.AppendUint64(b, uint64(count))
}

// parseSnapshot checks a whole snapshot file and returns its generation
// and its records' bytes.
func parseSnapshot(b []byte) (gen uint64, records []byte, err error) {
	if len(b) < snapHeader+4 || string(b[:8]) != snapMagic {
		return 0, nil, fmt.Errorf("%w: snapshot: not a snapshot file (bad magic or too short)", ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != snapVersion {
		return 0, nil, fmt.Errorf("%w: snapshot: format version %d, this build reads %d", ErrCorrupt, v, snapVersion)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return 0, nil, fmt.Errorf("%w: snapshot: checksum mismatch (truncated or damaged)", ErrCorrupt)
	}
	gen = binary.LittleEndian.Uint64(b[10:])
	want := binary.LittleEndian.Uint64(b[18:])
	records = body[snapHeader:]
	n, err := countRecords(records)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: snapshot: record %d: %v", ErrCorrupt, n, err)
	}
	if uint64(n) != want {
		return 0, nil, fmt.Errorf("%w: snapshot: %d records, header says %d", ErrCorrupt, n, want)
	}
	return gen, records, nil
}

// logHeaderOf returns the header of the log of generation gen.
func logHeaderOf(gen uint64) []byte {
	b := make([]byte, 0, logHeader)
	b = append(b, logMagic...)
	b = binary.LittleEndian.AppendUint16(b, logVersion)
	b = binary.LittleEndian.AppendUint64(b, gen)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// appendFrame appends one frame holding payload to b.
func appendFrame(b, payload []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(payload, castagnoli))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[len(b)-8:], castagnoli))
	return append(b, payload...)
}

// logContents is what a log holds: its intact frames' records, and how
// many bytes of a torn last write follow them.
type logContents struct {
	frames [][]byte
	torn   int
}

// parseLog checks a log of generation gen. A last write that a crash cut
// short or left unwritten is left out and counted in torn: a frame header
// cut short, an intact header whose length runs past the end of the file,
// a last frame whose payload fails its checksum, or a header that fails
// its own and is followed by nothing but zeros (a file extended by a crash
// before its data reached the disk). Any other damage is an error: above
// all a frame header that fails its checksum, which in format version 1
// (no header checksum, still read) passed for a torn tail.
func parseLog(b []byte, gen uint64) (logContents, error) {
	var lc logContents
	if len(b) < logHeader {
		if string(b[:min(len(b), len(logMagic))]) == logMagic[:min(len(b), len(logMagic))] {
			lc.torn = len(b) // a crash while the header was written
			return lc, nil
		}
		return lc, fmt.Errorf("%w: log: not a log file (too short)", ErrCorrupt)
	}
	h := b[:logHeader]
	v := binary.LittleEndian.Uint16(h[8:])
	switch {
	case string(h[:8]) != logMagic:
		return lc, fmt.Errorf("%w: log: not a log file (bad magic)", ErrCorrupt)
	case crc32.Checksum(h[:logHeader-4], castagnoli) != binary.LittleEndian.Uint32(h[logHeader-4:]):
		return lc, fmt.Errorf("%w: log: header checksum mismatch", ErrCorrupt)
	case v != logVersion && v != logVersion1:
		return lc, fmt.Errorf("%w: log: format version %d, this build reads %d and %d", ErrCorrupt, v, logVersion1, logVersion)
	case binary.LittleEndian.Uint64(h[10:]) != gen:
		return lc, fmt.Errorf("%w: log: generation %d, its name says %d", ErrCorrupt, binary.LittleEndian.Uint64(h[10:]), gen)
	}
	next := nextFrame
	if v == logVersion1 {
		next = nextFrameV1
	}
	for off := logHeader; off < len(b); {
		payload, size, err := next(b[off:])
		if err != nil {
			return lc, fmt.Errorf("%w: log: frame at byte %d: %v", ErrCorrupt, off, err)
		}
		if payload == nil {
			lc.torn = len(b) - off
			break
		}
		if n, err := countRecords(payload); err != nil {
			return lc, fmt.Errorf("%w: log: frame at byte %d, record %d: %v", ErrCorrupt, off, n, err)
		}
		lc.frames = append(lc.frames, payload)
		off += size
	}
	return lc, nil
}

// nextFrame reads the frame of format version 2 at the start of rest, the
// log from that frame on: its payload and its size, header included; a nil
// payload if rest is a torn last write; an error if the frame is damaged.
func nextFrame(rest []byte) (payload []byte, size int, err error) {
	if len(rest) < frameHeader {
		return nil, 0, nil
	}
	if crc32.Checksum(rest[:8], castagnoli) != binary.LittleEndian.Uint32(rest[8:]) {
		if allZero(rest) {
			return nil, 0, nil
		}
		return nil, 0, errors.New("frame header checksum mismatch (a damaged length)")
	}
	n := binary.LittleEndian.Uint32(rest)
	if n > maxFrame {
		return nil, 0, fmt.Errorf("a frame of %d bytes, more than %d", n, maxFrame)
	}
	if uint64(len(rest)-frameHeader) < uint64(n) {
		return nil, 0, nil // an intact header: the write was cut short
	}
	size = frameHeader + int(n)
	payload = rest[frameHeader:size]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(rest[4:]) {
		if size == len(rest) {
			return nil, 0, nil // the last write, not all of it on disk
		}
		return nil, 0, errors.New("checksum mismatch with more frames after it")
	}
	return payload, size, nil
}

// nextFrameV1 is nextFrame for format version 1, whose frame header has no
// checksum: a length that runs past the end of the file is taken for a
// write cut short.
func nextFrameV1(rest []byte) (payload []byte, size int, err error) {
	if len(rest) < frameHeaderV1 {
		return nil, 0, nil
	}
	n := binary.LittleEndian.Uint32(rest)
	if n > maxFrame || uint64(len(rest)-frameHeaderV1) < uint64(n) {
		return nil, 0, nil
	}
	size = frameHeaderV1 + int(n)
	payload = rest[frameHeaderV1:size]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(rest[4:]) {
		if size == len(rest) {
			return nil, 0, nil
		}
		return nil, 0, errors.New("checksum mismatch with more frames after it")
	}
	return payload, size, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
