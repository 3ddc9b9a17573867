package redisstore

import "github.com/actorlimit/actorlimit/algo"

// Key returns the Redis key of c's state in s.
func Key(s *Store, c *algo.Check) string { return s.key(c) }
