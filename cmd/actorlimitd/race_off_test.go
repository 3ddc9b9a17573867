//go:build !race

package main

// raceOn is whether the tests run under the race detector.
const raceOn = false
