package actorlimit

import "fmt"

// Over returns a Limiter whose checks b decides, with the same methods,
// validation and results as one made by [Start]; Close closes b. Its PID and
// PIDFor are b's PID.
func Over(b Backend) (*Limiter, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: Over: backend is nil", ErrInvalidArgument)
	}
	return &Limiter{shards: []Backend{b}, shared: backendShared(b)}, nil
}
