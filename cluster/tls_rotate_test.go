//go:build !race

package cluster_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/big"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// handshake connects to the member at addr over TLS, trusting caFile and
// presenting client's certificate, and returns the serial number of the
// certificate the member presents, and whether the member took the
// connection: it refuses a client certificate after its handshake (TLS
// 1.3), at the client's first read.
func handshake(t *testing.T, addr, caFile string, client *cluster.TLS) (*big.Int, error) {
	t.Helper()
	caPEM, err := os.ReadFile(caFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	cert, err := tls.LoadX509KeyPair(client.CertFile, client.KeyFile)
	require.NoError(t, err)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	serial := conn.ConnectionState().PeerCertificates[0].SerialNumber
	// The member's gRPC server sends its settings once it takes the
	// connection; a refused certificate is an alert instead.
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		err = nil
	}
	return serial, err
}

// serialOf is the serial number of s's certificate.
func serialOf(t *testing.T, s *cluster.TLS) *big.Int {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
	require.NoError(t, err)
	c, err := x509.ParseCertificate(cert.Certificate[0])
	require.NoError(t, err)
	return c.SerialNumber
}

// replace writes the files of from over those of to, as a deploy of a
// rotated certificate does, and gives them a later modification time.
func replace(t *testing.T, to, from string, at time.Time) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o600))
	require.NoError(t, os.Chtimes(to, at, at))
}

// TestTLSRotation: a member's certificate, key and CA files, rotated
// while it runs, are taken without a restart: it presents the new
// certificate to those who connect and to those it dials, and takes the
// certificates of a CA added to its CA file. Files that do not make a
// certificate and its key (the certificate written, not yet its key) leave
// the member on the ones it had. A peer's certificate that expires is
// refused from then on (the member's TLS clock is the test's).
func TestTLSRotation(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "members")
	start := time.Now()
	// The member's first certificate, and a copy of it a peer keeps
	// presenting, valid an hour.
	s := ca.issueWith(t, "m", func(c *x509.Certificate) { c.NotAfter = start.Add(time.Hour) })
	stale := ca.issueWith(t, "stale", func(c *x509.Certificate) { c.NotAfter = start.Add(time.Hour) })
	var ahead atomic.Int64 // how far the member's TLS clock is ahead of the wall clock
	cfg := cluster.WithTLSClock(cluster.Config{Clock: newFakeClock(), Partitions: 16},
		func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) })
	m := startTLSMembers(t, cfg, s)[0]
	first := serialOf(t, s)
	control := ca.issue(t, "control")

	serial, err := handshake(t, m.Address(), ca.caFile, control)
	require.NoError(t, err)
	assert.Equal(t, first, serial, "the first certificate")

	t.Run("a certificate without its key", func(t *testing.T) {
		next := ca.issue(t, "half")
		replace(t, s.CertFile, next.CertFile, start.Add(time.Second))
		serial, err := handshake(t, m.Address(), ca.caFile, control)
		require.NoError(t, err)
		assert.Equal(t, first, serial, "the member keeps the certificate it had")
		replace(t, s.KeyFile, next.KeyFile, start.Add(2*time.Second))
		serial, err = handshake(t, m.Address(), ca.caFile, control)
		require.NoError(t, err)
		assert.Equal(t, serialOf(t, next), serial, "once the key is written, the new certificate")
	})

	rotated := ca.issue(t, "rotated")
	replace(t, s.KeyFile, rotated.KeyFile, start.Add(3*time.Second))
	replace(t, s.CertFile, rotated.CertFile, start.Add(3*time.Second))
	t.Run("presented to those who connect", func(t *testing.T) {
		serial, err := handshake(t, m.Address(), ca.caFile, control)
		require.NoError(t, err)
		assert.Equal(t, serialOf(t, rotated), serial)
	})
	t.Run("presented to those it dials", func(t *testing.T) {
		// An outsider with a member's certificate whose server notes the
		// certificate of the member that dials it to answer.
		seen := make(chan *big.Int, 4)
		caPEM, err := os.ReadFile(ca.caFile)
		require.NoError(t, err)
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(caPEM))
		srv, err := tls.LoadX509KeyPair(control.CertFile, control.KeyFile)
		require.NoError(t, err)
		server := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{srv},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
			VerifyConnection: func(cs tls.ConnectionState) error {
				seen <- cs.PeerCertificates[0].SerialNumber
				return nil
			}}
		opts := outsiderTLS(t, ca.caFile, control, nil)
		opts = append(opts, remote.WithServerOptions(grpc.Creds(credentials.NewTLS(server))))
		o := newOutsider(t, opts)
		_, err = o.send(m.Address(), &clusterpb.DecideRequest{Partition: uint32(m.PartitionOf("k")), Checks: []*clusterpb.Check{
			{Op: 2, Id: "k", PeriodNs: int64(time.Hour), Limit: 2, N: 1}}}, 5*time.Second)
		require.NoError(t, err)
		assert.Equal(t, serialOf(t, rotated), <-seen)
	})

	t.Run("a CA added to the CA file", func(t *testing.T) {
		newCA := newTestCA(t, dir, "members-next")
		c := newCA.issue(t, "next-ca-member")
		_, err := handshake(t, m.Address(), ca.caFile, c)
		require.Error(t, err, "before: refused")
		both := append(must(os.ReadFile(ca.caFile)), must(os.ReadFile(newCA.caFile))...)
		require.NoError(t, os.WriteFile(ca.caFile, both, 0o600))
		require.NoError(t, os.Chtimes(ca.caFile, start.Add(4*time.Second), start.Add(4*time.Second)))
		_, err = handshake(t, m.Address(), ca.caFile, c)
		require.NoError(t, err, "after: taken")
	})

	t.Run("a peer's certificate refused once it expires", func(t *testing.T) {
		_, err := handshake(t, m.Address(), ca.caFile, stale)
		require.NoError(t, err, "valid: taken")
		ahead.Store(int64(2 * time.Hour))
		_, err = handshake(t, m.Address(), ca.caFile, stale)
		require.Error(t, err, "expired: refused")
		_, err = handshake(t, m.Address(), ca.caFile, control)
		require.NoError(t, err, "a valid one still taken")
	})
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
