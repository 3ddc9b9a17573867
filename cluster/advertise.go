package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strconv"

	"github.com/actorlimit/actorlimit"
)

// checkAdvertise checks c.Advertise: empty (the member is reached at
// Host:Port), or a host and a port from 1 to 65535. A member advertised
// beyond loopback takes messages from anyone who reaches that address, as
// one listening there does: it needs TLS or TrustedNetwork.
func (c Config) checkAdvertise() error {
	if c.Advertise == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(c.Advertise)
	if err != nil {
		return fmt.Errorf("%w: cluster.Config: Advertise %q is not host:port: %v", actorlimit.ErrInvalidArgument, c.Advertise, err)
	}
	if host == "" {
		return fmt.Errorf("%w: cluster.Config: Advertise %q has no host", actorlimit.ErrInvalidArgument, c.Advertise)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("%w: cluster.Config: Advertise %q: port %q is not from 1 to 65535", actorlimit.ErrInvalidArgument, c.Advertise, port)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%w: cluster.Config: Advertise %q: %s is no address the others can reach", actorlimit.ErrInvalidArgument, c.Advertise, host)
	}
	if c.TLS == nil && !c.TrustedNetwork && !isLoopback(host) {
		return fmt.Errorf("%w: cluster.Config: TLS is nil and Advertise %q is not loopback: anyone who reaches it could reset keys and take partitions; set TLS, or TrustedNetwork when only the members can reach it", actorlimit.ErrInvalidArgument, c.Advertise)
	}
	return nil
}

// advertisedHost is the host the others reach the member at: Advertise's,
// else Host.
func (c Config) advertisedHost() string {
	if h, _, err := net.SplitHostPort(c.Advertise); err == nil {
		return h
	}
	return c.Host
}

// checkCertName returns an error when the member's certificate (TLS's
// CertFile) does not name the host it is advertised at: the others check
// it when they dial that address, and would refuse every connection.
// Only an Advertise given is checked (a Host such as 0.0.0.0 is a
// listening address, not a name).
func (c Config) checkCertName() error {
	if c.TLS == nil || c.Advertise == "" {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(c.TLS.CertFile, c.TLS.KeyFile)
	if err != nil {
		return fmt.Errorf("%w: cluster.Config: TLS.CertFile %q: %v", actorlimit.ErrInvalidArgument, c.TLS.CertFile, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return fmt.Errorf("%w: cluster.Config: TLS.CertFile %q: %v", actorlimit.ErrInvalidArgument, c.TLS.CertFile, err)
	}
	host := c.advertisedHost()
	if err := leaf.VerifyHostname(host); err != nil {
		return fmt.Errorf("%w: cluster.Config: TLS.CertFile %q does not name the advertised host %q (Advertise %q), which the others check when they dial it: %v",
			actorlimit.ErrInvalidArgument, c.TLS.CertFile, host, c.Advertise, err)
	}
	return nil
}
