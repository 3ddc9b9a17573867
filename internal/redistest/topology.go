package redistest

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config is how StartConfig starts a redis-server beyond Start's defaults.
type Config struct {
	// Args are more arguments of redis-server ("--requirepass", "pw",
	// "--user", "alice on >secret ~* +@all", TLS files, ...).
	Args []string
	// Password is the default user's password (what --requirepass sets),
	// for the readiness PING and Client.
	Password string
	// TLS, when set, makes the server's port a TLS one (--tls-port, plain
	// port off): Args must give --tls-cert-file, --tls-key-file and
	// --tls-ca-cert-file. The readiness PING and Client use it.
	TLS *tls.Config
}

// StartConfig starts a redis-server as Start does, set up as cfg says.
func StartConfig(t testing.TB, cfg Config) *Server {
	t.Helper()
	return start(t, cfg.Args, &cfg)
}

// poll calls cond every 10 ms until it holds or within passes, then fails t
// naming what it waited for.
func poll(t testing.TB, within time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: %s: not within %v (last error: %v)", what, within, err)
		}
		time.Sleep(10 * time.Millisecond) // polling the servers, not waiting for time to pass
	}
}

// StartClusterOf starts n redis-servers in cluster mode and makes them one
// Redis Cluster with redis-cli --cluster create (the slots shared out, no
// replicas), and waits until every node says the cluster is ok. The nodes
// are set so that a node killed is seen failed within a second and the
// others keep serving their own slots (cluster-require-full-coverage no).
// A node killed and restarted rejoins with its slots (its nodes.conf is
// kept). Without redis-cli it skips or fails t as Start does.
func StartClusterOf(t testing.TB, n int) []*Server {
	t.Helper()
	need(t, "redis-cli", "redis-tools")
	nodes := make([]*Server, n)
	addrs := make([]string, n)
	for i := range nodes {
		dir := t.TempDir()
		nodes[i] = start(t, []string{"--cluster-enabled", "yes", "--cluster-config-file", dir + "/nodes.conf", "--dir", dir,
			"--cluster-node-timeout", "1000", "--cluster-require-full-coverage", "no"}, nil)
		addrs[i] = nodes[i].Addr
	}
	args := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, s := range nodes {
		c := redis.NewClient(&redis.Options{Addr: s.Addr})
		poll(t, 20*time.Second, "cluster ok on "+s.Addr, func() (bool, error) {
			info, err := c.ClusterInfo(context.Background()).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)), err
		})
		c.Close()
	}
	return nodes
}

// Sentinels is a primary, its replica and three redis-sentinels that
// monitor the primary under the name Master, quorum two.
type Sentinels struct {
	t       testing.TB
	Master  string
	Primary *Server
	Replica *Server
	// Addrs are the sentinels' addresses.
	Addrs []string
	cmds  []*exec.Cmd
	cfg   SentinelsConfig
}

// SentinelsConfig is how StartSentinels sets up the servers' and the
// sentinels' passwords; the zero value sets none.
type SentinelsConfig struct {
	// Password is the primary's and the replica's requirepass (and the
	// replica's masterauth, the sentinels' auth-pass).
	Password string
	// SentinelPassword is the sentinels' own requirepass (and the
	// sentinel-pass they give each other).
	SentinelPassword string
}

// StartSentinels starts a primary, a replica of it and three sentinels, set
// up as cfg says, and waits until every sentinel knows the replica and the
// other two. The sentinels call the primary down after 500 ms without an
// answer. All are killed at t's cleanup.
func StartSentinels(t testing.TB, cfg SentinelsConfig) *Sentinels {
	t.Helper()
	need(t, "redis-sentinel", "redis-sentinel")
	var auth []string
	if cfg.Password != "" {
		auth = []string{"--requirepass", cfg.Password, "--masterauth", cfg.Password}
	}
	srv := &Config{Password: cfg.Password}
	p := start(t, append([]string{"--dir", t.TempDir()}, auth...), srv)
	r := start(t, append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(p.port), "--dir", t.TempDir()}, auth...), srv)
	rc := redis.NewClient(&redis.Options{Addr: r.Addr, Password: cfg.Password})
	poll(t, 30*time.Second, "the replica in sync", func() (bool, error) {
		info, err := rc.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up"), err
	})
	rc.Close()
	s := &Sentinels{t: t, Master: "mymaster", Primary: p, Replica: r, cfg: cfg}
	t.Cleanup(s.kill)
	for i := range 3 {
		port := freePort(t)
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %[3]s 500\nsentinel failover-timeout %[3]s 5000\nsentinel parallel-syncs %[3]s 1\n",
			port, dir, s.Master, p.port)
		if cfg.Password != "" {
			text += fmt.Sprintf("sentinel auth-pass %s %s\n", s.Master, cfg.Password)
		}
		if cfg.SentinelPassword != "" {
			text += fmt.Sprintf("requirepass %s\nsentinel sentinel-pass %[1]s\n", cfg.SentinelPassword)
		}
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatalf("redistest: %v", err)
		}
		cmd := exec.Command("redis-sentinel", conf)
		if err := cmd.Start(); err != nil {
			t.Fatalf("redistest: start redis-sentinel %d: %v", i, err)
		}
		s.cmds = append(s.cmds, cmd)
		s.Addrs = append(s.Addrs, "127.0.0.1:"+strconv.Itoa(port))
	}
	for _, a := range s.Addrs {
		c := redis.NewSentinelClient(&redis.Options{Addr: a, Password: s.cfg.SentinelPassword})
		poll(t, 30*time.Second, "sentinel "+a+" knows the replica and the other sentinels", func() (bool, error) {
			ctx := context.Background()
			reps, err := c.Replicas(ctx, s.Master).Result()
			if err != nil || len(reps) != 1 || reps[0]["flags"] != "slave" {
				return false, err
			}
			others, err := c.Sentinels(ctx, s.Master).Result()
			return err == nil && len(others) == 2, err
		})
		c.Close()
	}
	return s
}

// MasterAddr returns the primary's address as the first sentinel sees it.
func (s *Sentinels) MasterAddr() (string, error) {
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addrs[0], Password: s.cfg.SentinelPassword})
	defer c.Close()
	a, err := c.GetMasterAddrByName(context.Background(), s.Master).Result()
	if err != nil {
		return "", err
	}
	return a[0] + ":" + a[1], nil
}

// WaitPromoted waits until every sentinel names addr the primary (30 s at
// most) and it says it is one.
func (s *Sentinels) WaitPromoted(addr string) {
	s.t.Helper()
	for _, a := range s.Addrs {
		c := redis.NewSentinelClient(&redis.Options{Addr: a, Password: s.cfg.SentinelPassword})
		poll(s.t, 30*time.Second, "sentinel "+a+" names "+addr+" the primary", func() (bool, error) {
			m, err := c.GetMasterAddrByName(context.Background(), s.Master).Result()
			return err == nil && m[0]+":"+m[1] == addr, err
		})
		c.Close()
	}
	c := redis.NewClient(&redis.Options{Addr: addr, Password: s.cfg.Password})
	defer c.Close()
	poll(s.t, 30*time.Second, addr+" is a primary", func() (bool, error) {
		info, err := c.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "role:master"), err
	})
}

func (s *Sentinels) kill() {
	for _, c := range s.cmds {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	s.cmds = nil
}

// need skips t, or fails it when CI is set, without the program cmd (of
// the Debian package pkg).
func need(t testing.TB, cmd, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(cmd); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not found and CI is set: install it (apt-get install %s): %v", cmd, pkg, err)
		}
		t.Skipf("%s not found: install it (apt-get install %s) to run this test", cmd, pkg)
	}
}
