package cluster

import "github.com/actorlimit/actorlimit"

// Tick runs one tick of m's sync loop (pipeline.go): with the wall clock in
// LocalFirst mode it sends a round and returns without waiting for its
// answers.
func (m *Member) Tick() { m.tick() }

// WallClock is the clock a Config without one gets.
func WallClock() actorlimit.TickerClock { return wallClock{} }
