package cluster_test

import (
	"os"

	"github.com/actorlimit/actorlimit/cluster"
)

// A member on 10.0.0.1 of three on separate hosts, which find each other
// with the automanaged provider and authenticate each other with mutual
// TLS (certificates made as docs/security.md shows). Not run: it needs the
// hosts and the files.
func ExampleTLS() {
	partitionKey, err := os.ReadFile("/etc/actorlimit/partition.key")
	if err != nil {
		panic(err)
	}
	m, err := cluster.Start(cluster.Config{
		Name: "limits",
		Host: "10.0.0.1",
		Port: 7400,
		AutoManaged: &cluster.AutoManaged{
			Port:  7401,
			Hosts: []string{"10.0.0.1:7401", "10.0.0.2:7401", "10.0.0.3:7401"},
		},
		TLS: &cluster.TLS{
			CertFile: "/etc/actorlimit/10.0.0.1.crt",
			KeyFile:  "/etc/actorlimit/10.0.0.1.key",
			CAFile:   "/etc/actorlimit/ca.pem",
		},
		PartitionKey: partitionKey, // the same random bytes on every member
	})
	if err != nil {
		panic(err)
	}
	defer m.Limiter.Close()
}
