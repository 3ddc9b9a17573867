package actorlimit

// SharedCounts reports whether l's counts outlive its process or are shared
// with other processes: kept by [WithPersistence], held in a store that says it is shared ([SharedStore],
// redisstore's), or, for a limiter made by [Over], decided by a Backend
// that says so with a SharedCounts() bool method of its own (a cluster
// member does). Code that turns values into ids under a key of its own
// (the secret values of httpadapter and of the service) must then use the
// same key on every process and across restarts, not one drawn per
// process. A nil or zero Limiter reports false.
func (l *Limiter) SharedCounts() bool { return l != nil && l.shared }

// sharedCounts reports what [Limiter.SharedCounts] says of a limiter
// started with s.
func (s settings) sharedCounts() bool {
	if s.journals != nil || s.Journal != nil {
		return true
	}
	sh, ok := s.Store.(SharedStore)
	return ok && sh.Shared()
}

// backendShared reports whether b says its counts are shared.
func backendShared(b Backend) bool {
	sh, ok := b.(interface{ SharedCounts() bool })
	return ok && sh.SharedCounts()
}
