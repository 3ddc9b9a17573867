package table

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// The table's record encoding (algo.Record.State), version 1:
//
//	version   1 byte (stateVersion)
//	Bucket    varint
//	Count     varint
//	Created   varint
//	Modified  varint
//	ext       uvarint length, then the live pairs of a sliding window or
//	          log (the first pair's gap is 0), or length 0
//
// The fields mean what they mean in the entry of each algorithm (see the
// package doc); Load checks them before it changes anything.
const stateVersion = 1

// errState is wrapped by every error of [Table.Load].
var errState = errors.New("table: bad record")

// Snapshot calls fn with the record of every entry whose state is alive
// after now, until fn returns false. The records' State shares one buffer
// that the next record overwrites: fn must copy what it keeps. Snapshot
// implements the limiter actor's Snapshotter contract.
func (t *Table) Snapshot(now int64, fn func(r algo.Record) bool) {
	var buf []byte
	t.ascend(func(e *node) bool {
		if e.end() <= now {
			return true
		}
		var r algo.Record
		r, buf = t.record(e, buf[:0])
		return fn(r)
	})
}

// Record returns the record of c's key: its state as [Table.Snapshot]
// writes it, or a record with nil State when the key has none. Its State
// is a buffer of the table's that the next call to Record overwrites: the
// caller copies what it keeps, and Record allocates nothing once the
// buffer has grown.
func (t *Table) Record(c *algo.Check) algo.Record {
	k := Key{Kind: uint8(c.Algorithm), Scale: int64(c.Period), ID: c.ID}
	if e := t.lookup(k); e != nil {
		var r algo.Record
		r, t.scratch = t.record(e, t.scratch[:0])
		return r
	}
	return algo.Record{Algorithm: c.Algorithm, Period: c.Period, ID: c.ID}
}

// record encodes e into buf and returns its record and the buffer.
func (t *Table) record(e *node, buf []byte) (algo.Record, []byte) {
	buf = append(buf, stateVersion)
	buf = binary.AppendVarint(buf, e.Bucket)
	buf = binary.AppendVarint(buf, e.Count)
	buf = binary.AppendVarint(buf, e.Created)
	buf = binary.AppendVarint(buf, e.Modified)
	var live []byte
	if x := t.ext[e]; x != nil && int(x.head) < len(x.buf) {
		live = x.buf[x.head:]
	}
	buf = binary.AppendUvarint(buf, uint64(len(live)))
	buf = append(buf, live...)
	return algo.Record{
		Algorithm: algo.Algorithm(e.Kind),
		Period:    time.Duration(e.Scale),
		ID:        e.ID,
		Death:     e.end(),
		State:     buf,
	}, buf
}

// Load puts r's state in the table, replacing the key's own: a record with
// nil State deletes it, and one whose Death, or whose entry's window, is at
// or before now is ignored. A record that does not decode to a valid entry
// of its algorithm is an error, and changes nothing.
func (t *Table) Load(now int64, r algo.Record) error {
	k := Key{Kind: uint8(r.Algorithm), Scale: int64(r.Period), ID: r.ID}
	if !r.Algorithm.Known() || r.Period <= 0 {
		return fmt.Errorf("%w: key %v/%v/%q", errState, r.Algorithm, r.Period, r.ID)
	}
	if r.State == nil {
		t.Delete(k)
		return nil
	}
	e, live, err := decodeState(r.State)
	if err != nil {
		return fmt.Errorf("%w: %q: %w", errState, r.ID, err)
	}
	if err := checkState(r.Algorithm, &e, live); err != nil {
		return fmt.Errorf("%w: %q: %w", errState, r.ID, err)
	}
	if r.Death <= now || (e.Bucket+1)*k.Scale <= now {
		return nil
	}
	t.Delete(k)
	n := t.insert(k, e.Bucket)
	n.Count, n.Created, n.Modified = e.Count, e.Created, e.Modified
	if len(live) > 0 {
		if t.ext == nil {
			t.ext = make(map[*node]*ext)
		}
		x := &ext{buf: append([]byte(nil), live...)}
		x.last = int32(lastPair(live))
		t.ext[n] = x
	}
	return nil
}

// decodeState reads an entry's fields and its live pairs from b.
func decodeState(b []byte) (e Entry, live []byte, err error) {
	if len(b) == 0 || b[0] != stateVersion {
		return Entry{}, nil, errors.New("unknown state version")
	}
	b = b[1:]
	for _, f := range []*int64{&e.Bucket, &e.Count, &e.Created, &e.Modified} {
		v, n := binary.Varint(b)
		if n <= 0 {
			return Entry{}, nil, errors.New("truncated state")
		}
		*f, b = v, b[n:]
	}
	l, n := binary.Uvarint(b)
	if n <= 0 || l != uint64(len(b)-n) {
		return Entry{}, nil, errors.New("bad slot list length")
	}
	return e, b[n:], nil
}

// checkState reports whether e and its pairs are an entry the algorithm a
// can work on.
func checkState(a algo.Algorithm, e *Entry, live []byte) error {
	switch a {
	case algo.FixedWindow:
		if len(live) > 0 {
			return errors.New("slots in a fixed window")
		}
	case algo.GCRA, algo.TokenBucket, algo.LeakyBucket:
		if len(live) > 0 {
			return errors.New("slots in a bucket")
		}
		if e.Count <= 0 || e.Created < 0 || e.Created >= e.Count {
			return errors.New("bad drain fraction")
		}
	default: // the sliding window and log
		return checkPairs(e, live)
	}
	return nil
}

// checkPairs checks that live holds whole pairs whose slots run from
// e.Created to e.Modified and whose counts sum to e.Count; an entry whose
// slots were all trimmed has none and counts nothing.
func checkPairs(e *Entry, live []byte) error {
	if len(live) == 0 {
		if e.Count != 0 {
			return errors.New("a count without slots")
		}
		return nil
	}
	slot, sum := e.Created, int64(0)
	for off := 0; off < len(live); {
		v, n := binary.Uvarint(live[off:])
		if n <= 0 {
			return errors.New("truncated slot")
		}
		gap, c := int64(v>>2), int64(1)
		switch v & 3 {
		case pairNext:
			gap, c = 1, int64(v>>2)+2
		case pairTail:
			w, m := binary.Uvarint(live[off+n:])
			if m <= 0 || w >= 1<<63-1 {
				return errors.New("truncated slot")
			}
			c, n = int64(w)+1, n+m
		case 3:
			return errors.New("bad slot tag")
		}
		if gap < 0 || c <= 0 || (off > 0 && gap == 0) {
			return errors.New("bad slot")
		}
		if slot += gap; slot < e.Created {
			return errors.New("slot overflow")
		}
		if sum += c; sum < 0 {
			return errors.New("slot counts overflow")
		}
		off += n
	}
	if sum != e.Count || slot != e.Modified {
		return errors.New("slots do not match the entry")
	}
	return nil
}

// lastPair returns the offset of the last pair of live, which holds whole
// pairs.
func lastPair(live []byte) int {
	last := 0
	for off := 0; off < len(live); {
		_, _, size := readPair(live[off:])
		last = off
		off += size
	}
	return last
}
