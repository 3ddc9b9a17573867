package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"

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

// clusterKey sets the members' partition key from -cluster-key-file: the
// file's bytes, less a trailing newline. The key stays out of the command
// line, where any user of the machine could read it.
func clusterKey(cfg *cluster.Config, c clusterFlags) error {
	if c.keyFile == "" {
		return nil
	}
	key, err := os.ReadFile(c.keyFile)
	if err != nil {
		return fmt.Errorf("-cluster-key-file: %w", err)
	}
	key = bytes.TrimRight(key, "\r\n")
	if len(key) < cluster.MinPartitionKeyLen {
		return fmt.Errorf("-cluster-key-file %s: the key is %d bytes, want at least %d (random bytes, the same file on every member)", c.keyFile, len(key), cluster.MinPartitionKeyLen)
	}
	cfg.PartitionKey = key
	return nil
}
