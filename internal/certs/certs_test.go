package certs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/internal/certs"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

// TestKeyPair: each step changes the files and says which pair Current
// then returns.
func TestKeyPair(t *testing.T) {
	dir := t.TempDir()
	ca := testkit.NewCA(t, dir, "kp")
	cert, key := ca.Issue(t, "a")
	pair, err := certs.NewKeyPair(cert, key, nil)
	require.NoError(t, err)
	first := pair.Current()
	require.NotNil(t, first)

	nextCert, nextKey := ca.Issue(t, "b")
	steps := []struct {
		name   string
		change func()
		want   string // "first", "same" (as the step before) or "new"
	}{
		{"unchanged", func() {}, "first"},
		{"the key alone replaced: no pair, the old one stays", func() { require.NoError(t, os.Rename(nextKey, key)) }, "first"},
		{"the certificate too: the new pair", func() { require.NoError(t, os.Rename(nextCert, cert)) }, "new"},
		{"a broken certificate: the last good pair", func() { require.NoError(t, os.WriteFile(cert, []byte("x"), 0o600)) }, "same"},
		{"the files removed: the last good pair", func() { require.NoError(t, os.Remove(cert)) }, "same"},
	}
	last := first
	for _, s := range steps {
		s.change()
		got := pair.Current()
		switch s.want {
		case "first":
			assert.Same(t, first, got, s.name)
		case "same":
			assert.Same(t, last, got, s.name)
		case "new":
			assert.NotEqual(t, first.Leaf.SerialNumber, got.Leaf.SerialNumber, s.name)
		}
		last = got
	}

	_, err = certs.NewKeyPair(filepath.Join(dir, "missing.crt"), key, nil)
	assert.ErrorContains(t, err, "missing.crt")
}
