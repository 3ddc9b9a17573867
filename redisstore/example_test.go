package redisstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/redisstore"
)

// Example shows a store on a Redis Cluster (or one server: the same
// UniversalClient), deciding a batch as the limiter actor will. It needs a
// running Redis, so it has no Output to check.
func Example() {
	client := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
	defer client.Close()
	store, err := redisstore.New(client,
		redisstore.WithPrefix("myapp:"),
		redisstore.WithOutage(redisstore.Fallback),
		redisstore.WithTimeout(100*time.Millisecond))
	if err != nil {
		panic(err)
	}
	checks := []algo.Check{{Algorithm: algo.GCRA, ID: "alice", Period: time.Second, Limit: 10, Burst: 10, N: 1}}
	out := make([]algo.Decision, len(checks))
	if err := store.Decide(context.Background(), time.Now().UnixNano(), checks, out); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out[0].Allowed)
}
