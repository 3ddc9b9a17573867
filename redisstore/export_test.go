package redisstore

import "github.com/actorlimit/actorlimit/algo"

// Key returns the Redis key of c's state in s.
func Key(s *Store, c *algo.Check) string { return s.key(c) }

// Scripts are the Lua sources of the scripts, by name.
var Scripts = map[string]string{"fixed": fixedScript, "count": countScript, "drain": drainScript}

// SetWall makes s read the wall clock (its probe's and log's pace) from f.
func SetWall(s *Store, f func() int64) { s.wall = f }

// RoundKeys returns the keys of checks made one after the other in one
// round, as a batch's are.
func RoundKeys(s *Store, checks []algo.Check) []string {
	r := new(round)
	keys := make([]string, len(checks))
	for i := range checks {
		keys[i] = s.roundKey(r, &checks[i])
	}
	return keys
}

// ArgString returns a command's argument that is a string, or a pointer to
// one (as the store passes its keys), as a string.
func ArgString(a any) string { return argString(a) }

// OwnIdle is how long the store's own connection may stay unused and still
// be used without the pool's health check.
const OwnIdle = ownIdle

// KeyAt returns the Redis key of c's state in s at now: under
// WithWindowKeys a fixed window's is the key of the window of now.
func KeyAt(s *Store, c *algo.Check, now int64) string { return s.keyAt(c, now) }
