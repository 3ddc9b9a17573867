package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/actorlimit/actorlimit"
)

// TLS is the members' mutual TLS: every member presents the certificate
// CertFile (with its key, KeyFile) and accepts only peers whose certificate
// the CA in CAFile signed, on both sides of every connection (TLS 1.3). A
// process without such a certificate cannot send a member anything.
//
// A member's certificate must name the host the others reach it at
// (Config.Host: an IP address or DNS subject alternative name), since a
// member checks the name of the member it dials; and, if it lists extended
// key usages, allow both serverAuth and clientAuth, since each member is
// both. The files are read once, by [Start].
type TLS struct {
	// CertFile is the member's certificate in PEM, possibly followed by
	// the intermediate certificates up to the CA.
	CertFile string
	// KeyFile is the certificate's private key in PEM.
	KeyFile string
	// CAFile holds, in PEM, the certificate of the CA (or CAs) that signs
	// the members' certificates.
	CAFile string
}

// minTLS is the oldest TLS version a member speaks: the members are all
// this package, so nothing older is needed.
const minTLS = tls.VersionTLS13

// configs reads the files of t and returns the TLS configurations of the
// member's server and of its connections to the other members. An error
// names the field at fault.
func (t *TLS) configs() (server, client *tls.Config, err error) {
	bad := func(field, file string, why any) error {
		return fmt.Errorf("%w: cluster.Config: TLS.%s %q: %v", actorlimit.ErrInvalidArgument, field, file, why)
	}
	for _, f := range []struct{ name, file string }{{"CertFile", t.CertFile}, {"KeyFile", t.KeyFile}, {"CAFile", t.CAFile}} {
		if f.file == "" {
			return nil, nil, fmt.Errorf("%w: cluster.Config: TLS.%s is empty", actorlimit.ErrInvalidArgument, f.name)
		}
	}
	certPEM, err := os.ReadFile(t.CertFile)
	if err != nil {
		return nil, nil, bad("CertFile", t.CertFile, err)
	}
	keyPEM, err := os.ReadFile(t.KeyFile)
	if err != nil {
		return nil, nil, bad("KeyFile", t.KeyFile, err)
	}
	caPEM, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, nil, bad("CAFile", t.CAFile, err)
	}
	if !hasCert(certPEM) {
		return nil, nil, bad("CertFile", t.CertFile, "holds no PEM certificate")
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, bad("KeyFile", t.KeyFile, fmt.Sprintf("not a key of TLS.CertFile's certificate: %v", err))
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, bad("CAFile", t.CAFile, "holds no PEM certificate")
	}
	server = &tls.Config{
		MinVersion:   minTLS,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}
	client = &tls.Config{
		MinVersion:   minTLS,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
	}
	return server, client, nil
}

// hasCert reports whether b holds a PEM certificate that parses.
func hasCert(b []byte) bool {
	return x509.NewCertPool().AppendCertsFromPEM(b)
}

// remoteOptions returns the options of the member's remote: its server
// receives gRPC messages of at most MaxReceiveBytes, and its connections
// carry one message of the engine in each gRPC message; with TLS, its
// server requires and checks the peers' certificates, and its connections
// present the member's and check the peer's, instead of the engine's
// default insecure connections. serverOpts are added to the server's.
func (c Config) remoteOptions(serverOpts ...grpc.ServerOption) ([]remote.ConfigOption, error) {
	server := append([]grpc.ServerOption{grpc.MaxRecvMsgSize(MaxReceiveBytes)}, serverOpts...)
	opts := []remote.ConfigOption{remote.WithEndpointWriterBatchSize(1)}
	if c.TLS == nil {
		return append(opts, remote.WithServerOptions(server...),
			remote.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()))), nil
	}
	serverTLS, clientTLS, err := c.TLS.configs()
	if err != nil {
		return nil, err
	}
	return append(opts,
		remote.WithServerOptions(append([]grpc.ServerOption{grpc.Creds(credentials.NewTLS(serverTLS))}, server...)...),
		remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)))), nil
}

// warnOpen logs, at WARN, that a member listens on a host other than
// loopback without TLS (which Config allows only with TrustedNetwork):
// anyone who reaches its port is taken for a member.
func (c Config) warnOpen(logger *slog.Logger) {
	if c.TLS != nil || isLoopback(c.Host) {
		return
	}
	logger.Warn("actorlimit cluster: the member listens beyond loopback without TLS: anyone who reaches its port can reset keys, change counts and take partitions; set Config.TLS",
		"host", c.Host, "port", c.Port)
}

// isLoopback reports whether host names only the loopback interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
