package algo

import (
	"errors"
	"testing"
	"time"
)

// A fixed window's negative count is no state a hit can make, and would
// allow hits beyond the limit: the decoder refuses it, and so does Check,
// for a state that came from elsewhere than the decoder (a peer's
// message).
func TestFixedStateNegativeCount(t *testing.T) {
	period, now := int64(time.Second), int64(1_700_000_000)*int64(time.Second)
	w := now / period
	tests := []struct {
		name string
		s    FixedState
		ok   bool
	}{
		{"empty", FixedState{}, true},
		{"counted", FixedState{Window: w, Count: 5}, true},
		{"count -1", FixedState{Window: w, Count: -1}, false},
		{"count -1000, an old window", FixedState{Window: w - 10, Count: -1000}, false},
	}
	for _, tt := range tests {
		if err := tt.s.Check(period, now); (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrState) {
			t.Errorf("%s: Check = %v, want ok %v", tt.name, err, tt.ok)
		}
		b, _ := tt.s.AppendBinary(nil)
		got := FixedState{Window: 7, Count: 7}
		err := got.UnmarshalBinary(b)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrState) {
			t.Errorf("%s: UnmarshalBinary = %v, want ok %v", tt.name, err, tt.ok)
		}
		if want := (FixedState{Window: 7, Count: 7}); !tt.ok && got != want || tt.ok && got != tt.s {
			t.Errorf("%s: UnmarshalBinary set %+v", tt.name, got)
		}
	}
}
