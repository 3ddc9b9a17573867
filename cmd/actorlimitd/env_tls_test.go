package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/actorlimit/actorlimit/internal/testkit"
)

// servedCert returns the serial of the certificate addr presents in a new
// TLS handshake (with client certificate cert, if not nil), or the
// handshake's error.
func servedCert(addr string, roots *x509.CertPool, cert *tls.Certificate) (string, error) {
	c := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", NextProtos: []string{"h2"}}
	if cert != nil {
		c.Certificates = []tls.Certificate{*cert}
	}
	conn, err := tls.Dial("tcp", addr, c)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	// TLS 1.3: the server checks the client's certificate after the
	// client's handshake ends; a read sees its refusal.
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := conn.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
		return "", err
	}
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

func isTimeout(err error) bool {
	type timeout interface{ Timeout() bool }
	t, ok := err.(timeout)
	return ok && t.Timeout()
}

func caPool(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(file)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	return pool
}

// TestServeTLSRotation: the listeners' certificate, rotated on disk under
// the running program, is the one a new handshake gets; files that do not
// make a pair leave the one before in use.
func TestServeTLSRotation(t *testing.T) {
	dir := t.TempDir()
	ca := testkit.NewCA(t, dir, "rot")
	pool := caPool(t, ca.File)
	cert, key := ca.Issue(t, "server")
	d := startWithConfig(t, serveConfig, "-tls-cert", cert, "-tls-key", key)

	first, err := servedCert(d.grpc, pool, nil)
	require.NoError(t, err)

	// A rotation as a Secret's update makes it: the new files renamed over
	// the old ones.
	newCert, newKey := ca.Issue(t, "server-next")
	require.NoError(t, os.Rename(newKey, key))
	require.NoError(t, os.Rename(newCert, cert))
	second, err := servedCert(d.grpc, pool, nil)
	require.NoError(t, err)
	assert.NotEqual(t, first, second, "a new handshake presents the rotated certificate")
	httpSerial, err := servedCert(d.http, pool, nil)
	require.NoError(t, err)
	assert.Equal(t, second, httpSerial, "the HTTP listener too")

	require.NoError(t, os.WriteFile(cert, []byte("not a certificate"), 0o600))
	kept, err := servedCert(d.grpc, pool, nil)
	require.NoError(t, err)
	assert.Equal(t, second, kept, "a broken file leaves the last good certificate")
	assert.Eventually(t, func() bool {
		return assert.ObjectsAreEqual(1, countLines(d.logs.String(), "do not make a certificate and its key"))
	}, 5*time.Second, 10*time.Millisecond, "the broken files are logged once")
	_, err = servedCert(d.grpc, pool, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, countLines(d.logs.String(), "do not make a certificate and its key"))
}

// countLines counts the log lines of s that hold sub.
func countLines(s, sub string) int { return strings.Count(s, sub) }

// TestEnvServerTLS: envoy ratelimit's GRPC_SERVER_* variables put gRPC on
// mutual TLS, with the client certificate's SAN required, and leave HTTP
// plain, as envoy ratelimit does.
func TestEnvServerTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testkit.NewCA(t, dir, "env")
	pool := caPool(t, ca.File)
	cert, key := ca.Issue(t, "server")
	clientCert, clientKey := ca.Issue(t, "client") // SANs 127.0.0.1 and localhost
	client, err := tls.LoadX509KeyPair(clientCert, clientKey)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "rt", "config"), 0o755))
	writeFile(t, filepath.Join(dir, "rt", "config", "c.yaml"), "domain: web\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: 5}\n")

	for _, c := range []struct {
		san    string
		refuse bool
	}{{"localhost", false}, {"other.example", true}} {
		t.Run(c.san, func(t *testing.T) {
			ports := freePorts(t, 3)
			env := []string{"RUNTIME_ROOT=" + dir, "RUNTIME_SUBDIRECTORY=rt", "USE_STATSD=false",
				"HOST=127.0.0.1", "PORT=" + strconv.Itoa(ports[0]), "GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(ports[1]),
				"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(ports[2]),
				"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=" + cert, "GRPC_SERVER_TLS_KEY=" + key,
				"GRPC_CLIENT_TLS_CACERT=" + ca.File, "GRPC_CLIENT_TLS_SAN=" + c.san}
			d, err := spawnEnv(t, env)
			require.NoError(t, err)

			conn, err := grpc.NewClient(d.grpc, grpc.WithTransportCredentials(credentials.NewTLS(
				&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{client}})))
			require.NoError(t, err)
			defer conn.Close()
			resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(t.Context(), request("web", desc("user", "u")))
			if c.refuse {
				require.Error(t, err, "a client certificate without %s", c.san)
			} else {
				require.NoError(t, err)
				assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.OverallCode)
			}
			_, err = servedCert(d.grpc, pool, nil)
			assert.Error(t, err, "no client certificate: refused")

			r, err := http.Get("http://" + d.http + "/healthcheck")
			require.NoError(t, err)
			r.Body.Close()
			assert.Equal(t, http.StatusOK, r.StatusCode, "HTTP stays plain, as envoy ratelimit's")
		})
	}
}
