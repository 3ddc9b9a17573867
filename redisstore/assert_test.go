package redisstore_test

import (
	"github.com/actorlimit/actorlimit/actor"
	"github.com/actorlimit/actorlimit/redisstore"
)

// The compile-time checks that Store is what the limiter actor drives. They
// sit in a test file so that the package itself never imports actor: no
// store imports the actor (TestImportRules in the root enforces it).
var (
	_ actor.Store    = (*redisstore.Store)(nil)
	_ actor.Screener = (*redisstore.Store)(nil)
	_ actor.Store    = (*redisstore.Split)(nil)
	_ actor.Screener = (*redisstore.Split)(nil)
	_ actor.Answerer = (*redisstore.Split)(nil)
)
