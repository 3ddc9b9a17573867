//go:build !race

package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

// docHosts is the member list of docs/security.md's certificate commands;
// the test makes certificates for 127.0.0.1 instead.
const docHosts = "10.0.0.1 10.0.0.2 10.0.0.3"

// TestSecurityDocCertificates runs docs/security.md's commands that make
// the members' CA and certificates, as written but for the members'
// addresses (127.0.0.1 here), then starts two members with them: they find
// each other over mutual TLS and, in Owner mode, hold one limit together.
func TestSecurityDocCertificates(t *testing.T) {
	script := docBlock(t, "../../docs/security.md", "### Certificates")
	require.Contains(t, script, docHosts)
	for _, prog := range []string{"sh", "openssl"} {
		if _, err := exec.LookPath(prog); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed", prog)
			}
			t.Skipf("%s is not installed", prog)
		}
	}
	dir := t.TempDir()
	cmd := exec.Command("sh", "-e", "-c", strings.ReplaceAll(script, docHosts, "127.0.0.1"))
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	pki := filepath.Join(dir, "members-pki")
	settings := &cluster.TLS{
		CertFile: filepath.Join(pki, "127.0.0.1.crt"),
		KeyFile:  filepath.Join(pki, "127.0.0.1.key"),
		CAFile:   filepath.Join(pki, "ca.pem"),
	}
	agent := test.NewInMemAgent()
	members := make([]*cluster.Member, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range members {
		wg.Go(func() {
			members[i], errs[i] = cluster.Start(cluster.Config{Name: "doc-tls", Host: "127.0.0.1", Mode: cluster.Owner,
				Provider: test.NewTestProvider(agent), TLS: settings})
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "member %d", i)
	}
	defer func() {
		for _, m := range members {
			_ = m.Close()
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for _, m := range members {
		for len(m.Members()) != 2 {
			require.True(t, time.Now().Before(deadline), "member %s sees %v", m.Address(), m.Members())
			time.Sleep(20 * time.Millisecond)
		}
	}
	policy := actorlimit.Policy{Limit: 3, Period: time.Hour}
	for i := range 4 {
		d, err := members[i%2].Limiter.Hit(context.Background(), "k", policy)
		require.NoError(t, err)
		assert.Equal(t, i < 3, d.Allowed, "hit %d: one limit over both members", i)
	}
}

// docBlock returns the first fenced block after the line heading in the
// doc at path.
func docBlock(t *testing.T, path, heading string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	var b strings.Builder
	state := 0 // 0 before the heading, 1 before the block, 2 in it
	for sc.Scan() {
		line := sc.Text()
		switch {
		case state == 0 && line == heading:
			state = 1
		case state == 1 && strings.HasPrefix(line, "```"):
			state = 2
		case state == 2 && strings.HasPrefix(line, "```"):
			return b.String()
		case state == 2:
			b.WriteString(line + "\n")
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("%s: no block after %q", path, heading)
	return ""
}
