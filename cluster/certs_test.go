package cluster_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/cluster"
)

// testCA is a certificate authority made by a test, with ECDSA P-256
// keys, whose files live in dir.
type testCA struct {
	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	caFile string
	serial int64
}

// newTestCA makes a CA called name, writing its certificate to
// dir/name-ca.pem.
func newTestCA(t testing.TB, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name + " CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	ca := &testCA{dir: dir, cert: cert, key: key, caFile: filepath.Join(dir, name+"-ca.pem"), serial: 1}
	writePEM(t, ca.caFile, "CERTIFICATE", der)
	return ca
}

// issue makes a member's certificate for 127.0.0.1, usable as server and
// client, and returns the TLS settings that name its files.
func (ca *testCA) issue(t testing.TB, name string) *cluster.TLS {
	t.Helper()
	return ca.issueWith(t, name, nil)
}

// issueWith is issue with the certificate's template changed by change
// (its validity, its names) when change is not nil.
func (ca *testCA) issueWith(t testing.TB, name string, change func(*x509.Certificate)) *cluster.TLS {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	if change != nil {
		change(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	s := &cluster.TLS{
		CertFile: filepath.Join(ca.dir, name+".crt"),
		KeyFile:  filepath.Join(ca.dir, name+".key"),
		CAFile:   ca.caFile,
	}
	writePEM(t, s.CertFile, "CERTIFICATE", der)
	writePEM(t, s.KeyFile, "PRIVATE KEY", keyDER)
	return s
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
}
