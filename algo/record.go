package algo

import "time"

// Record is one key's state as a store writes it out (a snapshot, a log of
// changes) and reads it back after a restart: the key, when its state dies,
// and the state itself in the encoding of the store that wrote it.
type Record struct {
	// Algorithm, Period and ID are the key, as in a [Check].
	Algorithm Algorithm
	Period    time.Duration
	ID        string
	// Death is the Unix ns time at which the state is back to full capacity
	// (a fixed window's end): a record dead by the time it is loaded is
	// skipped.
	Death int64
	// State is the algorithm's state in the writing store's own encoding,
	// opaque to everyone else; nil means the key has no state (it was reset
	// or expired).
	State []byte
}

// Cursor is where a walk over a store's records, taken a chunk at a time
// so that checks can be decided between two chunks, stands: the store that
// walks writes it and reads it back; nobody else looks inside. Its fields
// are a position in the store's own order (the table's: a key, and the
// bucket it is filed under). The zero Cursor is the start of the walk.
type Cursor struct {
	Algorithm Algorithm
	Period    time.Duration
	Bucket    int64
	ID        string
}
