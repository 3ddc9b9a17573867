package main

import (
	"errors"

	"github.com/actorlimit/actorlimit/cluster"
)

// clusterTLS sets the members' mutual TLS from the -cluster-tls-* flags:
// all three, or none.
func clusterTLS(cfg *cluster.Config, c clusterFlags) error {
	if c.tlsCert == "" && c.tlsKey == "" && c.tlsCA == "" {
		return nil
	}
	if c.tlsCert == "" || c.tlsKey == "" || c.tlsCA == "" {
		return errors.New("the members' mutual TLS needs all of -cluster-tls-cert, -cluster-tls-key and -cluster-tls-ca")
	}
	cfg.TLS = &cluster.TLS{CertFile: c.tlsCert, KeyFile: c.tlsKey, CAFile: c.tlsCA}
	return nil
}
