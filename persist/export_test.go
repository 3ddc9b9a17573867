package persist

// OnSnapshot makes j's writer call f each time a snapshot ends, written or
// not; it must be called before Start.
func OnSnapshot(j *Journal, f func()) { j.snapshotted = f }
