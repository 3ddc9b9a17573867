package cluster

// SharedCounts reports true: a member's counts are shared with the other
// members, so [actorlimit.Limiter.SharedCounts] of its Limiter says so too.
func (m *Member) SharedCounts() bool { return true }
