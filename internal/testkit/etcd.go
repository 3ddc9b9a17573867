package testkit

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// StartEtcd runs a real etcd server on free loopback ports until the test
// ends and returns its client address. Without an etcd binary it skips,
// unless CI is set: then it fails.
func StartEtcd(t testing.TB) string {
	t.Helper()
	return startEtcd(t, "http", nil)
}

// EtcdTLS is an etcd server that requires TLS and client certificates.
type EtcdTLS struct {
	// Endpoint is its client address (https).
	Endpoint string
	// CA signs its certificate and those of its clients.
	CA *CA
	// CertFile and KeyFile are a client certificate of CA's and its key,
	// with which the server takes anything until authentication is on.
	CertFile, KeyFile string
}

// StartEtcdTLS runs a real etcd server, as StartEtcd does, that speaks
// only TLS and takes only clients with a certificate from its CA (etcd's
// --client-cert-auth); its files are in dir.
func StartEtcdTLS(t testing.TB, dir string) EtcdTLS {
	t.Helper()
	ca := NewCA(t, dir, "etcd")
	cert, key := ca.Issue(t, "etcd-server")
	e := EtcdTLS{CA: ca}
	e.CertFile, e.KeyFile = ca.Issue(t, "etcd-admin")
	e.Endpoint = startEtcd(t, "https", []string{"--cert-file=" + cert, "--key-file=" + key,
		"--client-cert-auth", "--trusted-ca-file=" + ca.File})
	return e
}

func startEtcd(t testing.TB, scheme string, args []string) string {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("etcd is not installed, and CI is set (Debian: apt-get install etcd-server)")
		}
		t.Skip("etcd is not installed (Debian: apt-get install etcd-server); CI unset, so skipping")
	}
	ports := FreePorts(t, 2)
	client := fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	cmd := exec.Command(bin, append([]string{"--name=test", "--data-dir=" + t.TempDir(),
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=test=" + peer, "--log-level=error"}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting etcd: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0]), time.Second)
		if err == nil {
			_ = c.Close()
			return client
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd did not listen: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // etcd starting, not a window passing
	}
}
