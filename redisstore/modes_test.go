package redisstore_test

import "github.com/actorlimit/actorlimit/redisstore"

// mode is a way the store keeps fixed windows: every fixed-window test
// that compares decisions runs in each.
type mode struct {
	name string
	opts []redisstore.Option
}

// benchModes are the modes, named for benchstat (mode=script, mode=windowkeys).
var benchModes = []mode{{"script", nil}, {"windowkeys", []redisstore.Option{redisstore.WithWindowKeys()}}}
