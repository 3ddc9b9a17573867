package cluster_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

// TestStartRejectsBadTLS: a TLS setting that cannot work (an empty field, a
// missing file, a key that is not the certificate's, files with no
// certificate) is an error from Start that names the field, and nothing
// starts.
func TestStartRejectsBadTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "members")
	a, b := ca.issue(t, "a"), ca.issue(t, "b")
	empty := filepath.Join(dir, "empty.pem")
	require.NoError(t, os.WriteFile(empty, []byte("no PEM here\n"), 0o600))
	missing := filepath.Join(dir, "missing.pem")
	with := func(f func(s *cluster.TLS)) *cluster.TLS {
		s := *a
		f(&s)
		return &s
	}
	for _, tc := range []struct {
		name string
		tls  *cluster.TLS
		want string
	}{
		{"no cert file", with(func(s *cluster.TLS) { s.CertFile = "" }), "TLS.CertFile is empty"},
		{"no key file", with(func(s *cluster.TLS) { s.KeyFile = "" }), "TLS.KeyFile is empty"},
		{"no CA file", with(func(s *cluster.TLS) { s.CAFile = "" }), "TLS.CAFile is empty"},
		{"missing cert", with(func(s *cluster.TLS) { s.CertFile = missing }), "TLS.CertFile \"" + missing + "\": open"},
		{"missing key", with(func(s *cluster.TLS) { s.KeyFile = missing }), "TLS.KeyFile \"" + missing + "\": open"},
		{"missing CA", with(func(s *cluster.TLS) { s.CAFile = missing }), "TLS.CAFile \"" + missing + "\": open"},
		{"cert without certificate", with(func(s *cluster.TLS) { s.CertFile = empty }), "TLS.CertFile \"" + empty + "\": holds no PEM certificate"},
		{"key of another cert", with(func(s *cluster.TLS) { s.KeyFile = b.KeyFile }), "TLS.KeyFile \"" + b.KeyFile + "\": not a key of TLS.CertFile's certificate"},
		{"key file without key", with(func(s *cluster.TLS) { s.KeyFile = empty }), "TLS.KeyFile \"" + empty + "\": not a key"},
		{"CA without certificate", with(func(s *cluster.TLS) { s.CAFile = empty }), "TLS.CAFile \"" + empty + "\": holds no PEM certificate"},
		{"CA file is a key", with(func(s *cluster.TLS) { s.CAFile = a.KeyFile }), "TLS.CAFile \"" + a.KeyFile + "\": holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := cluster.Start(cluster.Config{Provider: noProvider{}, TLS: tc.tls})
			require.Error(t, err)
			assert.Nil(t, m)
			assert.True(t, errors.Is(err, actorlimit.ErrInvalidArgument), "%v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
