//go:build race

package cluster_test

// floodIDs is how many new ids TestFloodBoundsMemory sends: fewer under the
// race detector, which makes each hit about ten times slower.
const floodIDs = 100_000
