package redisstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlimit/actorlimit"
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

// Example_manyServers is what each app server behind a load balancer runs:
// a limiter whose state lives in the one Redis they share, so a client gets
// 10 hits a second in total, whichever servers it reaches. It needs a
// running Redis, so it has no Output to check.
func Example_manyServers() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:6379",
		ContextTimeoutEnabled: true, // reads stop at the store's timeout
		DialerRetries:         1,    // a dead Redis costs one refused dial
		MaxRetries:            -1,   // a failed batch goes to the outage mode at once
		Protocol:              2,    // RESP2: the store keeps a connection of its own
	})
	defer client.Close()
	store, err := redisstore.New(client, redisstore.WithPrefix("myapp:"))
	if err != nil {
		panic(err)
	}
	lim, err := actorlimit.Start(actorlimit.WithStore(store))
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	p := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 10, Period: time.Second}
	res, err := lim.Hit(context.Background(), "alice", p)
	if err != nil {
		fmt.Println(err) // only with WithOutage(redisstore.FailError)
		return
	}
	fmt.Println(res.Allowed, res.Remaining)
}

// Example_flood is an app server that expects floods of denied hits (bots,
// a spam wave): the over-limit cache answers a key's hits denied here,
// without Redis, for as long as Redis's denial lasts (at most a second),
// and four limiter actors share the store, each with its own round trip in
// flight. It needs a running Redis, so it has no Output to check.
func Example_flood() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:6379",
		ContextTimeoutEnabled: true,
		DialerRetries:         1,
		MaxRetries:            -1,
	})
	defer client.Close()
	store, err := redisstore.New(client, redisstore.WithPrefix("myapp:"),
		redisstore.WithDeniedCache(time.Second))
	if err != nil {
		panic(err)
	}
	lim, err := actorlimit.Start(actorlimit.WithStore(store), actorlimit.WithShards(4))
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	p := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 25, Period: time.Minute}
	res, err := lim.Hit(context.Background(), "203.0.113.7", p)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Allowed, store.Stats().Cached)
}
