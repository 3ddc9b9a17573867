package algo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The binary encoding of the typed states, version [StateVersion]. Every
// encoding starts with the version byte; the fields follow as varints
// (signed, zig-zag) or uvarints (unsigned), in this order:
//
//	FixedState   1, Window varint, Count varint, Created varint,
//	             Modified varint
//	BucketState  1, Empty varint, Frac uvarint, Rate uvarint
//	SlotState    1, Count uvarint, Base varint, then the live pairs
//	             (Pairs.Buf from Pairs.Head on) to the end, as they are
//	             kept (see appendPair)
//
// A SlotState's Newest is not written: it is Base plus the pairs' gaps. A
// decoder rejects another version, a truncated or overlong encoding, and
// fields no state of the algorithm can hold; [FixedState.Check] and its
// likes then check the state against the loading time.

// StateVersion is the version of the states' binary encoding.
const StateVersion = 1

// ErrState is wrapped by every error of decoding or checking a state.
var ErrState = errors.New("algo: bad state")

// AppendBinary appends s's encoding to b.
func (s *FixedState) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, StateVersion)
	b = binary.AppendVarint(b, s.Window)
	b = binary.AppendVarint(b, s.Count)
	b = binary.AppendVarint(b, s.Created)
	return binary.AppendVarint(b, s.Modified), nil
}

// UnmarshalBinary sets s from an encoding of [FixedState.AppendBinary]; on
// error it leaves s unchanged.
func (s *FixedState) UnmarshalBinary(b []byte) error {
	b, err := version(b)
	if err != nil {
		return err
	}
	var v FixedState
	for _, f := range []*int64{&v.Window, &v.Count, &v.Created, &v.Modified} {
		if *f, b, err = varint(b); err != nil {
			return err
		}
	}
	switch {
	case len(b) > 0:
		return fmt.Errorf("%w: %d bytes after a fixed window", ErrState, len(b))
	case v.Count < 0:
		return fmt.Errorf("%w: a fixed window's count %d, negative", ErrState, v.Count)
	}
	*s = v
	return nil
}

// Check reports whether s, a fixed window of period ns, can be loaded at
// now: its count must not be negative (no state from outside is trusted,
// and a negative count would allow hits beyond the limit), its window may
// be at most one window after the window of now (a writer whose clock was
// a little ahead), and must end before the largest int64. Windows already
// over are fine; they are dead.
func (s *FixedState) Check(period, now int64) error {
	if s.Count < 0 {
		return fmt.Errorf("%w: a fixed window's count %d, negative", ErrState, s.Count)
	}
	if w := FloorDiv(now, period); s.Window > w+1 {
		return fmt.Errorf("%w: window %d is after the next one, %d", ErrState, s.Window, w+1)
	}
	if s.Death(period) == math.MaxInt64 {
		return fmt.Errorf("%w: window %d of %d ns ends after the largest time", ErrState, s.Window, period)
	}
	return nil
}

// AppendBinary appends s's encoding to b.
func (s *BucketState) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, StateVersion)
	b = binary.AppendVarint(b, s.Empty)
	b = binary.AppendUvarint(b, uint64(s.Frac))
	return binary.AppendUvarint(b, uint64(s.Rate)), nil
}

// UnmarshalBinary sets s from an encoding of [BucketState.AppendBinary]; on
// error it leaves s unchanged.
func (s *BucketState) UnmarshalBinary(b []byte) error {
	b, err := version(b)
	if err != nil {
		return err
	}
	var v BucketState
	if v.Empty, b, err = varint(b); err != nil {
		return err
	}
	for _, f := range []*int64{&v.Frac, &v.Rate} {
		if *f, b, err = uvarint(b); err != nil {
			return err
		}
	}
	switch {
	case len(b) > 0:
		return fmt.Errorf("%w: %d bytes after a bucket", ErrState, len(b))
	case v.Rate <= 0 || v.Frac >= v.Rate:
		return fmt.Errorf("%w: a bucket's fraction %d/%d", ErrState, v.Frac, v.Rate)
	}
	*s = v
	return nil
}

// ahead is how far ahead of the loading process's clock the writer's may
// have been: an eighth of [MaxSpan], about twelve years. States within it
// keep every time the algorithms compute within an int64 until the year
// 2150, as the states they make themselves do.
const ahead = int64(MaxSpan / 8)

// Check reports whether s can be loaded at now: it must be empty by now
// plus [MaxSpan] (the longest a bucket may take to drain) and a margin for
// a writer whose clock was ahead.
func (s *BucketState) Check(now int64) error {
	if s.Empty > now && s.Empty-now > int64(MaxSpan)+ahead {
		return fmt.Errorf("%w: a bucket empty in %d ns, more than %d", ErrState, s.Empty-now, int64(MaxSpan)+ahead)
	}
	return nil
}

// AppendBinary appends the encoding of s's live part to b.
func (s *SlotState) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, StateVersion)
	b = binary.AppendUvarint(b, uint64(s.Count))
	b = binary.AppendVarint(b, s.Base)
	if h := int(s.Pairs.Head); h < len(s.Pairs.Buf) {
		b = append(b, s.Pairs.Buf[h:]...)
	}
	return b, nil
}

// UnmarshalBinary sets s from an encoding of [SlotState.AppendBinary], in a
// buffer of its own; on error it leaves s unchanged.
func (s *SlotState) UnmarshalBinary(b []byte) error {
	b, err := version(b)
	if err != nil {
		return err
	}
	var v SlotState
	if v.Count, b, err = uvarint(b); err != nil {
		return err
	}
	if v.Base, b, err = varint(b); err != nil {
		return err
	}
	if len(b) == 0 {
		return fmt.Errorf("%w: slots without a pair", ErrState)
	}
	slot, sum, last := v.Base, int64(0), 0
	for off := 0; off < len(b); {
		gap, c, size, err := checkPair(b[off:])
		if err != nil {
			return err
		}
		if off > 0 && gap == 0 {
			return fmt.Errorf("%w: two pairs of one slot", ErrState)
		}
		var over bool
		if slot, over = AddSat(slot, gap); over {
			return fmt.Errorf("%w: slots overflow", ErrState)
		}
		if sum, over = AddSat(sum, c); over {
			return fmt.Errorf("%w: slot counts overflow", ErrState)
		}
		last, off = off, off+size
	}
	if sum != v.Count {
		return fmt.Errorf("%w: the slots count %d hits, the state %d", ErrState, sum, v.Count)
	}
	v.Newest = slot
	v.Pairs = Pairs{Buf: append([]byte(nil), b...), Last: int32(last)}
	*s = v
	return nil
}

// checkPair decodes the pair at the start of b as readPair does, and says
// what is wrong with it if anything is.
func checkPair(b []byte) (gap, count int64, size int, err error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, 0, fmt.Errorf("%w: a truncated pair", ErrState)
	}
	switch v & 3 {
	case pairOne:
		return int64(v >> 2), 1, n, nil
	case pairNext:
		return 1, int64(v>>2) + 2, n, nil
	case pairTail:
		c, m := binary.Uvarint(b[n:])
		if m <= 0 || c >= math.MaxInt64 {
			return 0, 0, 0, fmt.Errorf("%w: a truncated pair", ErrState)
		}
		return int64(v >> 2), int64(c) + 1, n + m, nil
	}
	return 0, 0, 0, fmt.Errorf("%w: a pair of unknown kind", ErrState)
}

// CheckSlidingWindow reports whether s, a sliding window of period ns, can
// be loaded at now.
func (s *SlotState) CheckSlidingWindow(period, now int64) error {
	return s.check(slidingGrid(period), now)
}

// CheckSlidingLog reports whether s, a sliding log of period ns, can be
// loaded at now.
func (s *SlotState) CheckSlidingLog(period, now int64) error {
	return s.check(logGrid(period), now)
}

// check reports whether the slots of s lie after now minus [MaxSpan] and
// the margin for a writer's clock, and before now plus that margin, so
// that no time computed from them overflows.
func (s *SlotState) check(g grid, now int64) error {
	lo, hi := g.slot(now-int64(MaxSpan)-ahead), g.slot(now+ahead)
	if s.Base < lo || s.Newest > hi {
		return fmt.Errorf("%w: slots %d to %d, not between %d and %d", ErrState, s.Base, s.Newest, lo, hi)
	}
	return nil
}

// version checks the version byte at the start of b and returns the rest.
func version(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrState)
	}
	if b[0] != StateVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrState, b[0], StateVersion)
	}
	return b[1:], nil
}

func varint(b []byte) (int64, []byte, error) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, nil, fmt.Errorf("%w: a truncated number", ErrState)
	}
	return v, b[n:], nil
}

// uvarint reads a uvarint that must fit a non-negative int64.
func uvarint(b []byte) (int64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || v > math.MaxInt64 {
		return 0, nil, fmt.Errorf("%w: a truncated or too large number", ErrState)
	}
	return int64(v), b[n:], nil
}
