package main

import (
	"errors"

	"github.com/actorlimit/actorlimit/cluster"
)

// clusterTLS sets the members' mutual TLS from the -cluster-tls-* flags.
func clusterTLS(cfg *cluster.Config, c clusterFlags) error {
	if c.tlsCert == "" && c.tlsKey == "" && c.tlsCA == "" {
		return nil
	}
	return errors.New("-cluster-tls-cert, -cluster-tls-key and -cluster-tls-ca need cluster.Config.TLS, which this build lacks")
}
