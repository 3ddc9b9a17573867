//go:build !race

package cluster_test

// floodIDs is how many new ids TestFloodBoundsMemory sends: ten times
// floodBound, which the members' maps without their bounds fail (d88e981:
// the code before them held 100 199 keys in an owner's table, twice the
// bound, and 178 MiB of heap, past floodHeap, at 400 000 ids).
// ACTORLIMIT_FLOOD_IDS sends more: .ci/soak sends 2 000 000.
const floodIDs = 500_000
