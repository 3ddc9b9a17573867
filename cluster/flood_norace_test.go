//go:build !race

package cluster_test

// floodIDs is how many new ids TestFloodBoundsMemory sends.
const floodIDs = 2_000_000
