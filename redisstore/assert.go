package redisstore

import "github.com/actorlimit/actorlimit/actor"

var _ actor.Store = (*Store)(nil)
