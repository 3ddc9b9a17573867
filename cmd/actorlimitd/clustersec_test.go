package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/actorlimit/actorlimit/internal/testkit"
)

// TestClusterEtcdSecured: two actorlimitd processes find each other
// through a real etcd that takes only TLS clients with a certificate of
// its CA and, authentication on, only its users, each with the etcd
// flags (-cluster-etcd-ca, -cert, -key, -username, -password-file), and
// share one limit. etcd refuses a client without a certificate, one with
// a wrong password, and one whose certificate names no user of its;
// a member started without its certificate does not start.
func TestClusterEtcdSecured(t *testing.T) {
	if raceOn {
		t.Skip("cluster members run without -race (the engine's grpc logger race); CI runs this test without it")
	}
	dir := t.TempDir()
	e := testkit.StartEtcdTLS(t, dir)
	cert, key := e.CA.Issue(t, "member-host")              // no user of that name: the member needs its password too
	strangerCert, strangerKey := e.CA.Issue(t, "stranger") // etcd takes a certificate's name for its user
	password := filepath.Join(dir, "password")
	require.NoError(t, os.WriteFile(password, []byte("s3cret-member\n"), 0o600))

	client := func(cert, key, user, password string) (*clientv3.Client, error) {
		pool := x509.NewCertPool()
		pem, err := os.ReadFile(e.CA.File)
		require.NoError(t, err)
		require.True(t, pool.AppendCertsFromPEM(pem))
		tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if cert != "" {
			c, err := tls.LoadX509KeyPair(cert, key)
			require.NoError(t, err)
			tc.Certificates = []tls.Certificate{c}
		}
		return clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, TLS: tc, DialTimeout: 2 * time.Second,
			Username: user, Password: password})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := client(e.CertFile, e.KeyFile, "", "")
	require.NoError(t, err)
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "s3cret-root"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "member"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "member", "/actorlimitd", clientv3.GetPrefixRangeEnd("/actorlimitd"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.UserAdd(ctx, "member", "s3cret-member"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "member", "member"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		require.NoError(t, step())
	}
	require.NoError(t, admin.Close())

	refused := []struct {
		name, cert, key, user, password string
	}{
		{"no certificate", "", "", "member", "s3cret-member"},
		{"a wrong password", cert, key, "member", "wrong"},
		{"a certificate and no password", cert, key, "", ""},
		{"a certificate of the CA with no user of its name", strangerCert, strangerKey, "", ""},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			c, err := client(tt.cert, tt.key, tt.user, tt.password)
			if err == nil {
				defer c.Close()
				rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
				defer rcancel()
				_, err = c.Get(rctx, "/actorlimitd/x")
			}
			assert.Error(t, err, "etcd answered")
		})
	}
	t.Run("the member's credentials", func(t *testing.T) {
		c, err := client(cert, key, "member", "s3cret-member")
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Put(ctx, "/actorlimitd/x", "1")
		require.NoError(t, err, "the control: etcd takes the member's certificate and user")
	})

	config := filepath.Join(dir, "config.yaml")
	writeFile(t, config, "domain: c\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: 10}\n")
	args := []string{"-config", config, "-cluster-mode", "owner", "-cluster-name", "etcdsec", "-cluster-etcd", e.Endpoint,
		"-cluster-etcd-ca", e.CA.File, "-cluster-etcd-username", "member", "-cluster-etcd-password-file", password,
		"-secret-descriptor-keys", ""}
	_, err = spawn(t, args...)
	require.Error(t, err, "a member without its etcd certificate started")

	var ds []*daemon
	for range 2 {
		ds = append(ds, startDaemon(t, append(args, "-cluster-etcd-cert", cert, "-cluster-etcd-key", key)...))
	}
	for i, d := range ds {
		eventually(t, 30*time.Second, fmt.Sprintf("member %d sees 2", i), func() bool { return clusterMembers(d) == 2 })
	}
	allowed := 0
	for i := range 16 {
		resp, err := ds[i%2].ask(request("c", desc("k", "shared")))
		require.NoError(t, err)
		if resp.OverallCode == rlsv3.RateLimitResponse_OK {
			allowed++
		}
	}
	assert.Equal(t, 10, allowed, "one limit shared by two processes")
}

// TestClusterOpenMember: actorlimitd refuses a member beyond loopback
// without -cluster-tls-*, naming the flags that let it start; with
// -cluster-trusted-network, TLS, or on loopback, it goes on.
func TestClusterOpenMember(t *testing.T) {
	tests := []struct {
		name string
		args []string
		err  string
	}{
		{"every interface", []string{"-cluster-host", "0.0.0.0"}, `-cluster-host "0.0.0.0" is beyond loopback`},
		{"an address", []string{"-cluster-host", "10.1.2.3"}, "or -cluster-trusted-network"},
		{"trusted network", []string{"-cluster-host", "10.1.2.3", "-cluster-trusted-network"}, ""},
		{"TLS", []string{"-cluster-host", "10.1.2.3", "-cluster-tls-cert", "c", "-cluster-tls-key", "k", "-cluster-tls-ca", "a"}, ""},
		{"loopback", nil, ""},
		{"advertised beyond loopback", []string{"-cluster-advertise", "10.1.2.3:7000"}, `-cluster-advertise "10.1.2.3:7000" is beyond loopback`},
		{"advertised beyond loopback, trusted", []string{"-cluster-advertise", "10.1.2.3:7000", "-cluster-trusted-network"}, ""},
		{"advertised on loopback", []string{"-cluster-advertise", "127.0.0.2:7000"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parseFlags(append([]string{"-config", "x", "-cluster-peers", "p:1", "-cluster-peer-port", "1"}, tt.args...), io.Discard)
			require.NoError(t, err)
			err = f.cluster.openMember()
			if tt.err == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.err)
		})
	}
}

// TestClusterKeyFilesDiffer: two actorlimitd members whose
// -cluster-key-file differ refuse each other's requests and share no
// count: an id's one hit at the first and one at the second, its limit 1,
// is never denied at the second, and the refusals show in
// actorlimit_cluster_key_mismatches_total; with the same key file (the
// control) every second hit is denied and nothing is refused.
func TestClusterKeyFilesDiffer(t *testing.T) {
	if raceOn {
		t.Skip("cluster members run without -race (the engine's grpc logger race); CI runs this test without it")
	}
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "config.yaml")
	writeFile(t, config, "domain: c\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: 1}\n")
	keyA, keyB := filepath.Join(dir, "a.key"), filepath.Join(dir, "b.key")
	writeFile(t, keyA, "the cluster's key, 32 bytes long\n")
	writeFile(t, keyB, "another key, also 32 bytes long.\n")
	const ids = 20
	for _, tt := range []struct {
		name   string
		second string // the second member's key file
	}{{"same key file", keyA}, {"key files differ", keyB}} {
		t.Run(tt.name, func(t *testing.T) {
			ports := freePorts(t, 2)
			peers := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", ports[0], ports[1])
			var ds []*daemon
			for i, key := range []string{keyA, tt.second} {
				ds = append(ds, startDaemon(t, "-config", config, "-cluster-mode", "owner", "-cluster-name", "keys",
					"-cluster-peers", peers, "-cluster-peer-port", strconv.Itoa(ports[i]), "-cluster-key-file", key,
					"-secret-descriptor-keys", ""))
			}
			for i, d := range ds {
				eventually(t, 30*time.Second, fmt.Sprintf("member %d sees 2", i), func() bool { return clusterMembers(d) == 2 })
			}
			denied := 0
			for i := range ids {
				id := fmt.Sprint("id-", i)
				_, _ = ds[0].ask(request("c", desc("k", id)))
				resp, err := ds[1].ask(request("c", desc("k", id)))
				if err == nil && resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
					denied++
				}
			}
			mismatches := keyMismatches(ds[0]) + keyMismatches(ds[1])
			if tt.second == keyA {
				assert.Equal(t, ids, denied, "one count for each id")
				assert.Zero(t, mismatches)
				return
			}
			assert.Zero(t, denied, "no count shared")
			assert.Positive(t, mismatches, "the members refuse each other")
		})
	}
}

// keyMismatches is the actorlimit_cluster_key_mismatches_total d reports.
func keyMismatches(d *daemon) int {
	_, body := d.getDebug("/metrics")
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, "actorlimit_cluster_key_mismatches_total "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}
