package busypoll_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlimit/actorlimit/redisstore"
	"github.com/actorlimit/actorlimit/redisstore/busypoll"
)

// Example is an app server whose calls to a Redis on the same machine or
// rack rarely overlap: its client's connections poll for a reply for up to
// 100µs before they park. It needs a running Redis, so it has no Output to
// check.
func Example() {
	poller, err := busypoll.New(busypoll.Config{Spin: 100 * time.Microsecond})
	if err != nil {
		panic(err)
	}
	client := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:6379",
		Dialer:                poller.Dial, // replies are polled for
		ContextTimeoutEnabled: true,
		DialerRetries:         1,
		MaxRetries:            -1,
		Protocol:              2,
	})
	defer client.Close()
	store, err := redisstore.New(client, redisstore.WithPrefix("myapp:"))
	if err != nil {
		panic(err)
	}
	_ = store // actorlimit.WithStore(store)
	if err := client.Ping(context.Background()).Err(); err != nil {
		fmt.Println(err)
		return
	}
	st := poller.Stats()
	fmt.Println(st.Polled+st.Waited+st.Unpolled > 0)
}

// ExampleNew shows the error of a spin out of bounds.
func ExampleNew() {
	_, err := busypoll.New(busypoll.Config{Spin: time.Second})
	fmt.Println(err)
	// Output:
	// busypoll: invalid argument: Spin 1s is not in (0, 10ms]
}
