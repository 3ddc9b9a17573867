package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/internal/certs"
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
// both.
//
// [Start] reads the files, and fails when they do not make a certificate,
// its key and a CA. The member looks at them again (their modification
// time and size) at each TLS handshake, of a connection it takes or one it
// makes, and re-reads them when they changed: a rotated certificate, key
// or CA is taken without a restart, by the connections made from then on.
// Write the new files in place or rename them over the old ones; while
// they do not make a certificate and its key (the certificate written and
// not yet its key), the member keeps the ones it had, logs a warning, and
// tries again at the next handshake. A peer's certificate is checked at
// each handshake, so one past its NotAfter is refused from then on.
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
// member's server and of its connections to the other members, checking
// certificates at now's time. An error names the field at fault.
func (t *TLS) configs(now func() time.Time) (server, client *tls.Config, err error) {
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
		Time:         now,
	}
	client = &tls.Config{
		MinVersion:   minTLS,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		Time:         now,
	}
	return server, client, nil
}

// tlsFiles is a member's TLS configurations, re-read from its files when
// they change. It is safe for concurrent use.
type tlsFiles struct {
	t      TLS
	now    func() time.Time
	logger *slog.Logger

	mu             sync.Mutex
	stamps         [3]certs.Stamp // of CertFile, KeyFile, CAFile, as last read
	server, client *tls.Config
	failed         [3]certs.Stamp // the stamps of the last read that failed, to log it once
}

// newTLSFiles reads t's files: an error when they do not make a
// certificate, its key and a CA.
func newTLSFiles(t TLS, now func() time.Time, logger *slog.Logger) (*tlsFiles, error) {
	f := &tlsFiles{t: t, now: now, logger: logger}
	f.stamps = f.stampsNow()
	var err error
	if f.server, f.client, err = t.configs(now); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *tlsFiles) stampsNow() [3]certs.Stamp {
	return [3]certs.Stamp{certs.StampOf(f.t.CertFile), certs.StampOf(f.t.KeyFile), certs.StampOf(f.t.CAFile)}
}

// current returns the configurations of the files as they are now: read
// again when they changed since last read; the last good ones when they
// do not make a certificate, its key and a CA (logged once a change).
func (f *tlsFiles) current() (server, client *tls.Config) {
	f.mu.Lock()
	defer f.mu.Unlock()
	stamps := f.stampsNow()
	if stamps == f.stamps {
		return f.server, f.client
	}
	s, c, err := f.t.configs(f.now)
	if err != nil {
		if stamps != f.failed {
			f.failed = stamps
			f.logger.Warn("actorlimit cluster: the member's TLS files changed and do not make a certificate, its key and a CA: the ones read before stay in use",
				"err", err)
		}
		return f.server, f.client
	}
	f.stamps, f.server, f.client = stamps, s, c
	f.logger.Info("actorlimit cluster: the member's TLS files were read again", "cert", f.t.CertFile)
	return s, c
}

// reloadingCreds is gRPC's TLS transport with the configurations of
// files as they are at each handshake.
type reloadingCreds struct{ files *tlsFiles }

var _ credentials.TransportCredentials = reloadingCreds{}

// ClientHandshake does the member's side of a connection it makes.
func (r reloadingCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	_, client := r.files.current()
	return credentials.NewTLS(client).ClientHandshake(ctx, authority, conn)
}

// ServerHandshake does the member's side of a connection it takes.
func (r reloadingCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	server, _ := r.files.current()
	return credentials.NewTLS(server).ServerHandshake(conn)
}

// Info is the protocol's, TLS.
func (r reloadingCreds) Info() credentials.ProtocolInfo {
	_, client := r.files.current()
	return credentials.NewTLS(client).Info()
}

// Clone shares the files.
func (r reloadingCreds) Clone() credentials.TransportCredentials { return r }

// OverrideServerName is not used (gRPC's deprecated call).
func (r reloadingCreds) OverrideServerName(string) error { return nil }

// hasCert reports whether b holds a PEM certificate that parses.
func hasCert(b []byte) bool {
	return x509.NewCertPool().AppendCertsFromPEM(b)
}

// remoteOptions returns the options of the member's remote: its server
// receives gRPC messages of at most MaxReceiveBytes, and its connections
// carry one message of the engine in each gRPC message; with TLS, its
// server requires and checks the peers' certificates, and its connections
// present the member's and check the peer's, instead of the engine's
// default insecure connections, the files re-read when they change (see
// [TLS]). dialOpts are added to the connections', serverOpts to the
// server's. Its queue of messages to a member starts small (endpointQueue).
func (c Config) remoteOptions(dialOpts []grpc.DialOption, serverOpts ...grpc.ServerOption) ([]remote.ConfigOption, error) {
	server := append([]grpc.ServerOption{grpc.MaxRecvMsgSize(MaxReceiveBytes)}, serverOpts...)
	opts := []remote.ConfigOption{remote.WithEndpointWriterBatchSize(1), remote.WithEndpointWriterQueueSize(endpointQueue)}
	if c.TLS == nil {
		return append(opts, remote.WithServerOptions(server...),
			remote.WithDialOptions(c.dialOptions(append(dialOpts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)...)), nil
	}
	now := c.tlsNow
	if now == nil {
		now = time.Now
	}
	logger := c.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	files, err := newTLSFiles(*c.TLS, now, logger)
	if err != nil {
		return nil, err
	}
	creds := reloadingCreds{files}
	return append(opts,
		remote.WithServerOptions(append([]grpc.ServerOption{grpc.Creds(creds)}, server...)...),
		remote.WithDialOptions(c.dialOptions(append(dialOpts, grpc.WithTransportCredentials(creds))...)...)), nil
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
