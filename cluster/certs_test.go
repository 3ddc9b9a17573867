package cluster_test

import (
	"crypto/x509"
	"testing"

	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

// testCA is a certificate authority made by a test (testkit's), whose
// certificate is in caFile.
type testCA struct {
	*testkit.CA
	caFile string
}

// newTestCA makes a CA called name, writing its certificate to
// dir/name-ca.pem.
func newTestCA(t testing.TB, dir, name string) *testCA {
	t.Helper()
	ca := testkit.NewCA(t, dir, name)
	return &testCA{CA: ca, caFile: ca.File}
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
	cert, key := ca.IssueWith(t, name, change)
	return &cluster.TLS{CertFile: cert, KeyFile: key, CAFile: ca.caFile}
}
