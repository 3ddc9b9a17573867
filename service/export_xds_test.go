package service

import "time"

// Delay returns the wait before attempt n (0 first), with rnd in place of
// the random source.
func (b XDSBackoff) Delay(n int, rnd func() float64) time.Duration { return b.delay(n, rnd) }
