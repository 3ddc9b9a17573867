// Package redistest starts a real redis-server for tests: on a free loopback
// port, without persistence, killed when the test ends; alone or as a
// one-node Redis Cluster.
package redistest

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server that a test started.
type Server struct {
	t    testing.TB
	Addr string
	port int
	args []string // more arguments of redis-server
	cmd  *exec.Cmd

	// How the readiness PING reaches a server started with StartConfig.
	password string
	tls      *tls.Config
}

// Start starts a redis-server for t and stops it at t's cleanup. Without the
// binary it skips t, unless the CI environment variable is set: then it
// fails t.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, nil, nil)
}

// StartCluster starts, as Start does, a redis-server in cluster mode that
// holds all 16384 slots itself: a Redis Cluster of one node, which
// redis.NewClusterClient talks to as to any cluster (MOVED, CROSSSLOT and
// the scripts' one-slot rule apply). It waits until the cluster is ok.
func StartCluster(t testing.TB) *Server {
	t.Helper()
	dir := t.TempDir()
	s := start(t, []string{"--cluster-enabled", "yes", "--cluster-config-file", dir + "/nodes.conf", "--dir", dir}, nil)
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	ctx := context.Background()
	if err := c.Do(ctx, "cluster", "addslotsrange", 0, 16383).Err(); err != nil {
		t.Fatalf("redistest: CLUSTER ADDSLOTSRANGE on %s: %v", s.Addr, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: cluster on %s not ok: %v %s", s.Addr, err, info)
		}
		time.Sleep(10 * time.Millisecond) // polling for the server, not waiting for time to pass
	}
}

func start(t testing.TB, args []string, cfg *Config) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not found and CI is set: install it (apt-get install redis-server): %v", err)
		}
		t.Skip("redis-server not found: install it (apt-get install redis-server) to run this test")
	}
	port := freePort(t)
	s := &Server{t: t, port: port, Addr: "127.0.0.1:" + strconv.Itoa(port), args: args}
	if cfg != nil {
		s.password, s.tls = cfg.Password, cfg.TLS
	}
	s.Restart()
	t.Cleanup(s.Kill)
	return s
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Restart starts the server again on its port after [Server.Kill], and
// waits until it answers PING (10s at most).
func (s *Server) Restart() {
	s.t.Helper()
	ports := []string{"--port", strconv.Itoa(s.port)}
	if s.tls != nil {
		ports = []string{"--port", "0", "--tls-port", strconv.Itoa(s.port)}
	}
	args := append(append(ports, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"), s.args...)
	s.cmd = exec.Command("redis-server", args...)
	var out bytes.Buffer
	s.cmd.Stdout, s.cmd.Stderr = &out, &out
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("redistest: start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, Password: s.password, TLSConfig: s.tls})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.Kill()
			s.t.Fatalf("redistest: redis-server on %s did not answer PING: %v\n%s", s.Addr, err, out.String())
		}
		time.Sleep(10 * time.Millisecond) // polling for the server, not waiting for time to pass
	}
}

// Kill stops the server at once (SIGKILL) and waits for it.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Client returns a client of the server, closed at the test's cleanup.
func (s *Server) Client(opts ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: s.Addr, Password: s.password, TLSConfig: s.tls}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// String returns the server's address.
func (s *Server) String() string { return fmt.Sprintf("redis-server %s", s.Addr) }

// ClusterClient returns a cluster client of a server that StartCluster
// started, closed at the test's cleanup.
func (s *Server) ClusterClient(opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	o := &redis.ClusterOptions{Addrs: []string{s.Addr}}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClusterClient(o)
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}
