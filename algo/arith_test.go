package algo

import (
	"math"
	"testing"
)

func TestAddSat(t *testing.T) {
	tests := []struct {
		a, b, want int64
		over       bool
	}{
		{1, 2, 3, false},
		{math.MaxInt64, 1, math.MaxInt64, true},
		{math.MaxInt64 - 1, 1, math.MaxInt64, false},
		{math.MinInt64, -1, math.MinInt64, true},
		{math.MinInt64, 1, math.MinInt64 + 1, false},
		{-5, 3, -2, false},
	}
	for _, tt := range tests {
		if got, over := AddSat(tt.a, tt.b); got != tt.want || over != tt.over {
			t.Errorf("AddSat(%d, %d) = %d, %v; want %d, %v", tt.a, tt.b, got, over, tt.want, tt.over)
		}
	}
}

func TestMulSat(t *testing.T) {
	tests := []struct{ a, b, want int64 }{
		{3, 4, 12},
		{-3, 4, -12},
		{0, math.MaxInt64, 0},
		{2, math.MaxInt64/2 + 1, math.MaxInt64},
		{-2, math.MaxInt64/2 + 1, math.MinInt64},
		{math.MinInt64, 1, math.MinInt64},
		{math.MinInt64, 2, math.MinInt64},
		{1 << 32, 1 << 31, math.MaxInt64}, // 2^63 does not fit
	}
	for _, tt := range tests {
		if got := mulSat(tt.a, tt.b); got != tt.want {
			t.Errorf("mulSat(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// FixedState.Death is the end of the window, saturating.
func TestFixedDeath(t *testing.T) {
	tests := []struct {
		s      FixedState
		period int64
		want   int64
	}{
		{FixedState{Window: 4}, 10, 50},
		{FixedState{Window: -1}, 10, 0},
		{FixedState{Window: math.MaxInt64}, 1, math.MaxInt64},
		{FixedState{Window: 3}, math.MaxInt64 / 2, math.MaxInt64},
	}
	for _, tt := range tests {
		if got := tt.s.Death(tt.period); got != tt.want {
			t.Errorf("%+v.Death(%d) = %d, want %d", tt.s, tt.period, got, tt.want)
		}
	}
}
