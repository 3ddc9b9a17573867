//go:build !race

package cluster_test

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

// A member of a one-member cluster in Owner mode: its Limiter is the
// ordinary public API. Real members give a registry as the Provider (etcd,
// Consul, Kubernetes, ...) and leave Mode at LocalFirst.
func ExampleStart() {
	m, err := cluster.Start(cluster.Config{
		Name:     "example",
		Provider: test.NewTestProvider(test.NewInMemAgent()),
		Mode:     cluster.Owner,
	})
	if err != nil {
		panic(err)
	}
	defer m.Limiter.Close()

	p := actorlimit.Policy{Limit: 2, Period: time.Hour}
	for i := 1; i <= 3; i++ {
		res, err := m.Limiter.Hit(context.Background(), "user:42", p)
		if err != nil {
			panic(err)
		}
		fmt.Printf("hit %d: allowed %v, count %d\n", i, res.Allowed, res.Count)
	}
	// Output:
	// hit 1: allowed true, count 1
	// hit 2: allowed true, count 2
	// hit 3: allowed false, count 3
}
