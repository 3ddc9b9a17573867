package algo_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

func TestTextRoundTrip(t *testing.T) {
	want := []string{"fixed_window", "sliding_window", "gcra", "token_bucket", "leaky_bucket", "sliding_log"}
	all := algo.All()
	if len(all) != len(want) {
		t.Fatalf("All() has %d algorithms, want %d", len(all), len(want))
	}
	for i, a := range all {
		text, err := a.MarshalText()
		if err != nil || string(text) != want[i] {
			t.Errorf("%v.MarshalText() = %q, %v; want %q", a, text, err, want[i])
		}
		var back algo.Algorithm
		if err := back.UnmarshalText(text); err != nil || back != a {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", text, back, err, a)
		}
	}
}

func TestUnknownAlgorithm(t *testing.T) {
	a := algo.GCRA
	err := a.UnmarshalText([]byte("fixed-window"))
	if !errors.Is(err, algo.ErrInvalid) || !strings.Contains(err.Error(), "known: fixed_window") {
		t.Errorf("UnmarshalText(fixed-window) = %v, want an ErrInvalid listing the known names", err)
	}
	if a != algo.GCRA {
		t.Errorf("a failed UnmarshalText changed a to %v", a)
	}
	if _, err := algo.Algorithm(6).MarshalText(); !errors.Is(err, algo.ErrInvalid) {
		t.Errorf("MarshalText of Algorithm(6) = %v, want ErrInvalid", err)
	}
	if s := algo.Algorithm(6).String(); s != "Algorithm(6)" {
		t.Errorf("String = %q", s)
	}
}

func TestValidate(t *testing.T) {
	ms, day := time.Millisecond, 24*time.Hour
	tests := []struct {
		name   string
		a      algo.Algorithm
		limit  int64
		period time.Duration
		burst  int64
		want   string // "" for valid
	}{
		{"fixed window", algo.FixedWindow, 10, 30 * time.Second, 0, ""},
		{"fixed window of any length", algo.FixedWindow, 1, time.Duration(math.MaxInt64/1_000_000) * ms, 0, ""},
		{"limit 0 denies, valid", algo.GCRA, 0, day, 0, ""},
		{"unknown", algo.Algorithm(6), 1, ms, 0, "unknown Policy.Algorithm Algorithm(6)"},
		{"negative limit", algo.GCRA, -1, ms, 0, "Policy.Limit is -1, negative"},
		{"negative burst", algo.GCRA, 1, ms, -1, "Policy.Burst is -1, negative"},
		{"zero period", algo.TokenBucket, 1, 0, 0, "Policy.Period is 0s, not positive"},
		{"period past MaxSpan", algo.SlidingWindow, 1, algo.MaxSpan + ms, 0, "longer than about 100 years, too long for SlidingWindow"},
		{"windowed, not whole ms", algo.SlidingLog, 1, 1500 * time.Microsecond, 0, "not a whole number of milliseconds"},
		{"sliding log too large", algo.SlidingLog, algo.MaxSlidingLogLimit + 1, ms, 0, "too large a log for SlidingLog"},
		{"bucket at the nanosecond", algo.LeakyBucket, 3, 7 * time.Nanosecond, 0, ""},
		{"drain past MaxSpan", algo.TokenBucket, 1, day, 50_000, "takes longer than about 100 years to drain"},
		{"huge burst", algo.GCRA, 1, ms, math.MaxInt64, "takes longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := algo.Validate(tt.a, tt.limit, tt.period, tt.burst)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, algo.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want ErrInvalid containing %q", err, tt.want)
			}
		})
	}
}

func TestCapacityAndDrainTime(t *testing.T) {
	if c := algo.Capacity(algo.LeakyBucket, 10, 0); c != 11 {
		t.Errorf("LeakyBucket capacity = %d, want 11", c)
	}
	if c := algo.Capacity(algo.GCRA, 10, 4); c != 4 {
		t.Errorf("GCRA capacity = %d, want 4", c)
	}
	if c := algo.Capacity(algo.LeakyBucket, 1, math.MaxInt64); c != math.MaxInt64 {
		t.Errorf("LeakyBucket capacity at MaxInt64 = %d, want no wrap", c)
	}
	if d, ok := algo.DrainTime(int64(time.Minute), 10, 10); !ok || d != time.Minute {
		t.Errorf("DrainTime(1m, 10, 10) = %v, %v", d, ok)
	}
	if d, ok := algo.DrainTime(10, 3, 1); !ok || d != 4 {
		t.Errorf("DrainTime(10ns, 3, 1) = %v, %v; want 4ns rounded up", d, ok)
	}
	if _, ok := algo.DrainTime(int64(algo.MaxSpan), 1, 2); ok {
		t.Error("DrainTime of two MaxSpans is ok")
	}
}
