package algo

import (
	"math"
	"math/bits"
)

// FloorDiv returns floor(a/b) for b > 0, rounding toward minus infinity where
// Go's / rounds toward zero.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// AddSat returns a+b, or the int64 nearest to it and true if it does not
// fit.
func AddSat(a, b int64) (int64, bool) {
	s := a + b
	if (a >= 0) == (b >= 0) && (s >= 0) != (a >= 0) {
		if b > 0 {
			return math.MaxInt64, true
		}
		return math.MinInt64, true
	}
	return s, false
}

// mulSat returns a*b for b > 0, or the int64 nearest to it if it does not
// fit.
func mulSat(a, b int64) int64 {
	hi, lo := bits.Mul64(uint64(max(a, -a)), uint64(b))
	if a == math.MinInt64 || hi != 0 || lo > math.MaxInt64 {
		if a < 0 {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	if a < 0 {
		return -int64(lo)
	}
	return int64(lo)
}
