//go:build race

package actorlimit_test

// raceOn is whether the tests run under the race detector, whose sync.Pool
// drops items at random (so a pooled call is sometimes allocated anew).
const raceOn = true
