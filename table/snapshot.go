package table

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/actorlimit/actorlimit/algo"
)

// A record's State is the entry's typed state in the encoding of package
// algo, version [algo.StateVersion]: a version byte, then the fields of
// [algo.FixedState], [algo.BucketState] or [algo.SlotState] as varints (the
// slots' live pairs as they are kept). The record's Algorithm says which;
// its Death is when that state is back to full capacity.

// ErrRecord is wrapped by every error of [Table.Load].
var ErrRecord = errors.New("table: bad record")

// Snapshot calls fn with the record of every entry whose state is alive
// after now, in the order of [Table.Ascend], until fn returns false: the
// whole walk of [Table.SnapshotChunk] in one call. The records' State share
// one buffer that the next record overwrites: fn must copy what it keeps.
// Entries of a Kind that is no algorithm (made by [Table.Add] alone) are
// left out.
func (t *Table) Snapshot(now int64, fn func(r algo.Record) bool) {
	t.SnapshotChunk(now, &algo.Cursor{}, 0, fn)
}

// SnapshotChunk walks a table a chunk at a time, for a table too large to
// walk between two checks: it walks the entries after cur, in the
// same order, at most max of them (max <= 0: no bound) or until fn returns
// false, calls fn with the record of each that is alive after now, moves
// cur past the last entry walked, and reports whether entries may remain
// after it. The zero Cursor starts the walk. The table may change between
// two calls: an entry left unchanged since the walk started is given
// exactly once; one added, changed or deleted since may be given any
// number of times or not at all (a check moves its entry in the order):
// whoever walks must learn of those changes otherwise (the limiter's log
// of changed keys). It implements the limiter actor's Snapshotter
// contract.
func (t *Table) SnapshotChunk(now int64, cur *algo.Cursor, max int, fn func(r algo.Record) bool) (more bool) {
	var (
		buf []byte
		// ids holds a copy of each walked entry's id, which the records
		// and cur name; it is never written over, so those strings stay
		// valid whatever becomes of the table (one buffer, not one
		// string, per walked entry).
		ids []byte
	)
	walked := 0
	for _, r := range t.sortedRuns() {
		g := group{uint8(cur.Algorithm), int64(cur.Period)}
		if cur.Period != 0 && (r.kind < g.kind || r.kind == g.kind && r.scale < g.scale) {
			continue // walked in an earlier chunk
		}
		visit := func(i uint32) bool {
			e := t.at(i)
			if e.Window == cur.Bucket && r.group == g && t.idOf(e) == cur.ID {
				return true // the last one walked: the pivot of this chunk
			}
			if max > 0 && walked == max {
				more = true
				return false
			}
			walked++
			var id string
			id, ids = t.stableID(e, ids)
			cur.Algorithm, cur.Period, cur.Bucket, cur.ID = algo.Algorithm(r.kind), time.Duration(r.scale), e.Window, id
			var (
				death int64
				ok    bool
			)
			buf, death, ok = t.appendState(buf[:0], i)
			if !ok || death <= now {
				return true
			}
			more = !fn(algo.Record{
				Algorithm: algo.Algorithm(r.kind), Period: time.Duration(r.scale), ID: id,
				Death: death, State: buf,
			})
			return !more
		}
		if r.group == g {
			t.pivot.window, t.pivot.id = cur.Bucket, cur.ID
			r.tree.AscendGreaterOrEqual(0, visit)
			t.pivot.id = ""
		} else {
			r.tree.Ascend(visit)
		}
		if more {
			return true
		}
	}
	return false
}

// Record returns the record of c's key: its state as [Table.Snapshot]
// writes it, in a new slice, or a record with nil State when the key has
// none.
func (t *Table) Record(c *algo.Check) algo.Record {
	r := algo.Record{Algorithm: c.Algorithm, Period: c.Period, ID: c.ID}
	i := t.lookup(Key{Kind: uint8(c.Algorithm), Scale: int64(c.Period), ID: c.ID})
	if i == 0 {
		return r
	}
	if st, death, ok := t.appendState(nil, i); ok {
		r.State, r.Death = st, death
	}
	return r
}

// stableID returns e's id as a string that nothing overwrites: a long id
// as the table holds it, a short one copied to the end of ids, which it
// returns.
func (t *Table) stableID(e *node, ids []byte) (string, []byte) {
	n := e.idLen()
	if n == longID || n == 0 {
		return t.idOf(e), ids
	}
	start := len(ids)
	ids = append(ids, e.id[:n]...)
	return unsafe.String(&ids[start], int(n)), ids
}

// appendState appends the encoding of node i's state to b and returns it
// with the state's death (Unix ns); ok is false if a sliding entry has lost
// its pairs.
func (t *Table) appendState(b []byte, i uint32) (_ []byte, death int64, ok bool) {
	e := t.at(i)
	r := t.runs[e.run]
	w0, w1, w2 := t.words(e, r)
	switch a := algo.Algorithm(r.kind); a {
	case algo.FixedWindow:
		s := algo.FixedState{Window: e.Window, Count: w0, Created: w1, Modified: w2}
		b, _ = s.AppendBinary(b)
		return b, s.Death(r.scale), true
	case algo.GCRA, algo.TokenBucket, algo.LeakyBucket:
		s := algo.BucketState{Empty: w2, Frac: w1, Rate: w0}
		b, _ = s.AppendBinary(b)
		return b, s.Death(), true
	case algo.SlidingWindow, algo.SlidingLog:
		x := t.ext[i]
		if x == nil {
			return b, 0, false
		}
		s := algo.SlotState{Count: w0, Base: w1, Newest: w2, Pairs: *x}
		b, _ = s.AppendBinary(b)
		if a == algo.SlidingLog {
			return b, algo.SlidingLogDeath(&s, r.scale), true
		}
		return b, algo.SlidingWindowDeath(&s, r.scale), true
	}
	panic(unknown(algo.Algorithm(r.kind))) // entries are made by checks and records of known algorithms
}

// Load puts r's state in the table, replacing the key's own: a record with
// nil State deletes it, and one whose Death, or whose state's own death,
// is at or before now is ignored. A record whose key is not one a check
// could have (an unknown algorithm, an empty ID, a period the algorithm
// does not accept), whose State does not decode to a state of its
// algorithm, or whose state lies too far from now for the algorithms'
// arithmetic (see [algo.BucketState.Check] and its likes) is an error
// wrapping [ErrRecord], and changes nothing. The loaded entry has no chance
// against eviction yet, as a new one; in a full table its insertion evicts
// another.
func (t *Table) Load(now int64, r algo.Record) error {
	if err := checkKey(&r); err != nil {
		return err
	}
	k := Key{Kind: uint8(r.Algorithm), Scale: int64(r.Period), ID: r.ID}
	if r.State == nil {
		t.Delete(k)
		return nil
	}
	var (
		death, bucket int64
		set           func(i uint32)
		err           error
	)
	switch r.Algorithm {
	case algo.FixedWindow:
		var s algo.FixedState
		if err = s.UnmarshalBinary(r.State); err == nil {
			err = s.Check(k.Scale, now)
		}
		death, bucket = s.Death(k.Scale), s.Window
		set = func(i uint32) {
			e := t.at(i)
			t.setWords(e, t.runs[e.run], s.Count, s.Created, s.Modified)
		}
	case algo.GCRA, algo.TokenBucket, algo.LeakyBucket:
		var s algo.BucketState
		if err = s.UnmarshalBinary(r.State); err == nil {
			err = s.Check(now)
		}
		death = s.Death()
		bucket = deathBucket(death, k.Scale)
		set = func(i uint32) {
			e := t.at(i)
			t.setWords(e, t.runs[e.run], s.Rate, s.Frac, s.Empty)
		}
	case algo.SlidingWindow, algo.SlidingLog:
		var s algo.SlotState
		if err = s.UnmarshalBinary(r.State); err == nil {
			if r.Algorithm == algo.SlidingLog {
				err = s.CheckSlidingLog(k.Scale, now)
				death = algo.SlidingLogDeath(&s, k.Scale)
			} else {
				err = s.CheckSlidingWindow(k.Scale, now)
				death = algo.SlidingWindowDeath(&s, k.Scale)
			}
		}
		bucket = deathBucket(death, k.Scale)
		set = func(i uint32) {
			if t.ext == nil {
				t.ext = make(map[uint32]*algo.Pairs)
			}
			t.ext[i] = &s.Pairs
			e := t.at(i)
			t.setWords(e, t.runs[e.run], s.Count, s.Base, s.Newest)
		}
	default: // checkKey let through an algorithm with no case here
		return fmt.Errorf("%w: %s", ErrRecord, unknown(r.Algorithm))
	}
	if err != nil {
		return fmt.Errorf("%w: %v %v %q: %w", ErrRecord, r.Algorithm, r.Period, r.ID, err)
	}
	if r.Death <= now || death <= now {
		return nil
	}
	t.Delete(k)
	set(t.insert(k, bucket))
	return nil
}

// checkKey says what is wrong with r's key, if anything: what
// [algo.Validate] and the root would refuse in a check.
func checkKey(r *algo.Record) error {
	p := r.Period
	switch {
	case !r.Algorithm.Known():
		return fmt.Errorf("%w: unknown algorithm %v", ErrRecord, r.Algorithm)
	case r.ID == "":
		return fmt.Errorf("%w: empty ID", ErrRecord)
	case p <= 0:
		return fmt.Errorf("%w: %v period %v, not positive", ErrRecord, r.Algorithm, p)
	case r.Algorithm.Windowed() && p%time.Millisecond != 0:
		return fmt.Errorf("%w: %v period %v, not whole milliseconds", ErrRecord, r.Algorithm, p)
	case r.Algorithm != algo.FixedWindow && p > algo.MaxSpan:
		return fmt.Errorf("%w: %v period %v, longer than %v", ErrRecord, r.Algorithm, p, algo.MaxSpan)
	}
	return nil
}
