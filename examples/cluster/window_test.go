package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/actorlimit/actorlimit"
)

// TestDecidedIn: a hit is filed under the window in which the limiter
// decided it, read from its result, whatever the window in which it was
// sent; hits decided outside the windows driven are not filed.
func TestDecidedIn(t *testing.T) {
	const period = time.Second
	start := time.Unix(1_000, 0) // a window's start
	tests := []struct {
		name       string
		sent       time.Duration // after start
		decided    time.Duration // after start
		wantWindow int
		wantOK     bool
	}{
		{"at once, first window", 100 * time.Millisecond, 100 * time.Millisecond, 0, true},
		{"on the first window's start", 0, 0, 0, true},
		{"sent in the first window, decided in the second", 999 * time.Millisecond, 1001 * time.Millisecond, 1, true},
		{"decided on the second window's start", 999 * time.Millisecond, time.Second, 1, true},
		{"last nanosecond of the second window", 1999 * time.Millisecond, 2*time.Second - 1, 1, true},
		{"sent in the last window, decided after it", 2999 * time.Millisecond, 3000 * time.Millisecond, 3, false},
		{"before the first window", -time.Millisecond, -time.Millisecond, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			decided := start.Add(tt.decided).UnixNano()
			end := (decided/int64(period) + 1) * int64(period)
			res := actorlimit.Result{Allowed: true, ResetAfter: time.Duration(end - decided)}
			w, ok := decidedIn(res, start.Add(tt.sent), start, period, 3)
			assert.Equal(t, tt.wantWindow, w)
			assert.Equal(t, tt.wantOK, ok)
		})
	}
}

// TestWindowAfter: windows start on multiples of their length in Unix
// time, as the limiter's do.
func TestWindowAfter(t *testing.T) {
	at := time.Unix(1_000, 300_000_000) // 1000.3 s
	assert.Equal(t, time.Unix(1_001, 0), windowAfter(at, time.Second, 1))
	assert.Equal(t, time.Unix(1_001, 0), windowAfter(at, 7*time.Second, 1)) // 143*7 = 1001
	assert.Equal(t, time.Unix(1_000, 0), windowAfter(at, time.Second, 0))
}
