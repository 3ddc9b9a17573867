package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// clusterSecurity are the flags that say how the members' network and
// their etcd are protected.
type clusterSecurity struct {
	// trustedNetwork: -cluster-trusted-network, the member may listen
	// beyond loopback without -cluster-tls-*.
	trustedNetwork bool
	// advertise: -cluster-advertise, the host:port the other members
	// reach this one at (cluster.Config.Advertise); "" for
	// -cluster-host and -cluster-port.
	advertise string
	// etcdCA, etcdCert, etcdKey: -cluster-etcd-ca, -cluster-etcd-cert,
	// -cluster-etcd-key, etcd's TLS.
	etcdCA, etcdCert, etcdKey string
	// etcdUser, etcdPasswordFile: -cluster-etcd-username and
	// -cluster-etcd-password-file, etcd's authentication.
	etcdUser, etcdPasswordFile string
}

// register adds the flags of s to fs.
func (s *clusterSecurity) register(fs *flag.FlagSet) {
	fs.StringVar(&s.advertise, "cluster-advertise", "", "the host:port the other members reach this one at, behind a NAT or a proxy (default: -cluster-host and -cluster-port); with -cluster-tls-*, this member's certificate must name its host")
	fs.BoolVar(&s.trustedNetwork, "cluster-trusted-network", false, "let a member listen beyond loopback without -cluster-tls-*: only the members can reach the members' ports")
	fs.StringVar(&s.etcdCA, "cluster-etcd-ca", "", "with -cluster-etcd: the CA (PEM) that signs etcd's server certificate; turns TLS on")
	fs.StringVar(&s.etcdCert, "cluster-etcd-cert", "", "with -cluster-etcd: this member's client certificate (PEM) for etcd; with -cluster-etcd-key")
	fs.StringVar(&s.etcdKey, "cluster-etcd-key", "", "with -cluster-etcd: the client certificate's key (PEM); with -cluster-etcd-cert")
	fs.StringVar(&s.etcdUser, "cluster-etcd-username", "", "with -cluster-etcd: etcd user; with -cluster-etcd-password-file")
	fs.StringVar(&s.etcdPasswordFile, "cluster-etcd-password-file", "", "with -cluster-etcd: file holding the etcd user's password")
}

// etcdConfig returns the etcd client's configuration for endpoints, from
// the -cluster-etcd-* flags: TLS when -cluster-etcd-ca or a client
// certificate is given, the user's name and password when given. Each
// error names the flag at fault.
func (s clusterSecurity) etcdConfig(endpoints []string) (clientv3.Config, error) {
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second}
	switch {
	case (s.etcdCert == "") != (s.etcdKey == ""):
		return cfg, errors.New("-cluster-etcd-cert and -cluster-etcd-key go together")
	case (s.etcdUser == "") != (s.etcdPasswordFile == ""):
		return cfg, errors.New("-cluster-etcd-username and -cluster-etcd-password-file go together")
	}
	if s.etcdCA != "" || s.etcdCert != "" {
		t := &tls.Config{MinVersion: tls.VersionTLS12}
		if s.etcdCA != "" {
			pem, err := os.ReadFile(s.etcdCA)
			if err != nil {
				return cfg, fmt.Errorf("-cluster-etcd-ca: %w", err)
			}
			t.RootCAs = x509.NewCertPool()
			if !t.RootCAs.AppendCertsFromPEM(pem) {
				return cfg, fmt.Errorf("-cluster-etcd-ca %s: holds no PEM certificate", s.etcdCA)
			}
		}
		if s.etcdCert != "" {
			cert, err := tls.LoadX509KeyPair(s.etcdCert, s.etcdKey)
			if err != nil {
				return cfg, fmt.Errorf("-cluster-etcd-cert %s, -cluster-etcd-key %s: %w", s.etcdCert, s.etcdKey, err)
			}
			t.Certificates = []tls.Certificate{cert}
		}
		cfg.TLS = t
	}
	if s.etcdUser != "" {
		pw, err := os.ReadFile(s.etcdPasswordFile)
		if err != nil {
			return cfg, fmt.Errorf("-cluster-etcd-password-file: %w", err)
		}
		pw = bytes.TrimRight(pw, "\r\n")
		if len(pw) == 0 {
			return cfg, fmt.Errorf("-cluster-etcd-password-file %s: empty", s.etcdPasswordFile)
		}
		cfg.Username, cfg.Password = s.etcdUser, string(pw)
	}
	return cfg, nil
}

// openMember returns an error when c would start a member beyond loopback
// that takes any message from anyone who reaches its port: without
// -cluster-tls-* and without -cluster-trusted-network, or advertised
// beyond loopback (-cluster-advertise) so.
func (c clusterFlags) openMember() error {
	if c.tlsCert != "" || c.trustedNetwork {
		return nil
	}
	if host, _, err := net.SplitHostPort(c.advertise); err == nil && beyondLoopback(host) {
		return fmt.Errorf("-cluster-advertise %q is beyond loopback and the members' port has no TLS: anyone who reaches it could reset keys and take partitions; give -cluster-tls-cert, -cluster-tls-key and -cluster-tls-ca, or -cluster-trusted-network when only the members can reach it", c.advertise)
	}
	if !beyondLoopback(c.host) {
		return nil
	}
	return fmt.Errorf("-cluster-host %q is beyond loopback and the members' port has no TLS: anyone who reaches it could reset keys and take partitions; give -cluster-tls-cert, -cluster-tls-key and -cluster-tls-ca (certificates from the members' CA), or -cluster-trusted-network when only the members can reach their ports", c.host)
}
