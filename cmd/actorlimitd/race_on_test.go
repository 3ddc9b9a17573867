//go:build race

package main

// raceOn is whether the tests run under the race detector: the cluster
// processes test is left out then (the cluster engine's grpc logger race),
// and run without it in CI.
const raceOn = true
