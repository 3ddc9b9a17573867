package redisstore_test

import "github.com/actorlimit/actorlimit/redisstore"

// mode is a way the store keeps fixed windows: the tests that compare
// fixed windows' decisions run in each.
type mode struct {
	name string
	opts []redisstore.Option // added to the store's own; both modes have WithCallerTime
	win  bool                // a key per window (WithWindowKeys)
}

// modes are the ways, named for benchstat (mode=script, mode=windowkeys).
var modes = []mode{
	{"script", nil, false},
	{"windowkeys", []redisstore.Option{redisstore.WithWindowKeys()}, true},
}

// withMode returns opts and m's.
func withMode(m mode, opts ...redisstore.Option) []redisstore.Option {
	return append(append([]redisstore.Option{}, opts...), m.opts...)
}
