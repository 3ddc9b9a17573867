package actorlimit

import "fmt"

// Backend decides the checks of a Limiter made by [Over]: another way of
// deciding than the limiter actors [Start] spawns, such as the members of a
// cluster (package cluster). The Limiter validates every input before a
// Backend sees it, so a Backend's checks are valid. A Backend is safe for
// concurrent use; its methods return the errors the Limiter documents
// (ErrClosed, a context's error, ...), wrapped or not. PID may return nil.
type Backend interface {
	backend
}

// Over returns a Limiter whose checks b decides, with the same methods,
// validation and results as one made by [Start]; Close closes b. Its PID and
// PIDFor are b's PID.
func Over(b Backend) (*Limiter, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: Over: backend is nil", ErrInvalidArgument)
	}
	return &Limiter{shards: []backend{b}}, nil
}
