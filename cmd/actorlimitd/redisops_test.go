package main

import (
	"context"
	"crypto/tls"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/internal/redistest"
)

// TestRedisFlagForms: what -redis and its flags parse to, and the errors
// that name what is wrong.
func TestRedisFlagForms(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "pw")
	writeFile(t, pwFile, "from-file\n")
	good := []struct {
		args []string
		want redisTarget
	}{
		{[]string{"-redis", "10.0.0.1:6379"}, redisTarget{typ: "single", network: "tcp", addrs: []string{"10.0.0.1:6379"}}},
		{[]string{"-redis", "redis://alice:pw@r:6380/2"},
			redisTarget{typ: "single", network: "tcp", addrs: []string{"r:6380"}, user: "alice", password: "pw", db: 2}},
		{[]string{"-redis", "rediss://r:6380"}, redisTarget{typ: "single", network: "tcp", addrs: []string{"r:6380"}, tls: true}},
		{[]string{"-redis", "r:1", "-redis-tls", "-redis-auth", "bob:pw"},
			redisTarget{typ: "single", network: "tcp", addrs: []string{"r:1"}, user: "bob", password: "pw", tls: true}},
		{[]string{"-redis", "r:1", "-redis-auth", "secret"}, redisTarget{typ: "single", network: "tcp", addrs: []string{"r:1"}, password: "secret"}},
		{[]string{"-redis", "redis://alice@r:1", "-redis-password-file", pwFile},
			redisTarget{typ: "single", network: "tcp", addrs: []string{"r:1"}, user: "alice", password: "from-file"}},
		{[]string{"-redis", "/run/redis.sock"}, redisTarget{typ: "single", network: "unix", addrs: []string{"/run/redis.sock"}}},
		{[]string{"-redis", "unix:///run/redis.sock"}, redisTarget{typ: "single", network: "unix", addrs: []string{"/run/redis.sock"}}},
		{[]string{"-redis", "a:1,b:2,c:3", "-redis-type", "CLUSTER"},
			redisTarget{typ: "cluster", network: "tcp", addrs: []string{"a:1", "b:2", "c:3"}}},
		{[]string{"-redis", "mymaster,s1:26379,s2:26379", "-redis-type", "sentinel", "-redis-sentinel-auth", "sp"},
			redisTarget{typ: "sentinel", network: "tcp", addrs: []string{"s1:26379", "s2:26379"}, master: "mymaster", sentinelPass: "sp"}},
		{[]string{"-redis", "redis://s1:26379,redis://s2:26379", "-redis-type", "sentinel", "-redis-sentinel-master", "m"},
			redisTarget{typ: "sentinel", network: "tcp", addrs: []string{"s1:26379", "s2:26379"}, master: "m"}},
	}
	for _, g := range good {
		f, err := parseFlags(append([]string{"-config", "x"}, g.args...), io.Discard)
		require.NoError(t, err, "%v", g.args)
		got, err := f.redisOpts.main.parse("redis")
		require.NoError(t, err, "%v", g.args)
		assert.Equal(t, g.want, got, "%v", g.args)
	}
	bad := []struct {
		args []string
		msg  string
	}{
		{[]string{"-redis", "r"}, `-redis "r": want a redis:// or rediss:// URL, host:port or a socket path`},
		{[]string{"-redis", "http://r:1"}, `-redis "http://r:1"`},
		{[]string{"-redis", "redis://r:1?dial_timeout=1s"}, "URL parameters are not read"},
		{[]string{"-redis", "redis://r:1/x"}, `the database "x" is not a number`},
		{[]string{"-redis", "a:1,b:2"}, "-redis lists 2 addresses"},
		{[]string{"-redis", "a:1", "-redis-type", "ring"}, `-redis-type "ring": want single, sentinel or cluster`},
		{[]string{"-redis", "a:1", "-redis-type", "sentinel"}, "needs the master's name"},
		{[]string{"-redis", "a:1", "-redis-sentinel-master", "m"}, "go with -redis-type sentinel"},
		{[]string{"-redis", "redis://u:p@a:1", "-redis-auth", "q"}, "give the password of -redis once"},
		{[]string{"-redis", "a:1", "-redis-password-file", "/nonexistent/pw"}, "-redis-password-file"},
		{[]string{"-redis", "a:1", "-redis-tls-cert", "c"}, "-redis-tls-cert and -redis-tls-key go together"},
		{[]string{"-redis", "a:1", "-redis-socket-type", "udp"}, `-redis-socket-type "udp"`},
		{[]string{"-redis", "/s.sock", "-redis-type", "cluster"}, "a socket path goes with -redis-type single only"},
		{[]string{"-redis-persecond"}, "-redis-persecond needs -redis"},
		{[]string{"-redis", "a:1", "-redis-persecond"}, "-redis-persecond needs -redis-persecond-url"},
		{[]string{"-redis", "a:1", "-redis-persecond-url", "b:1"}, "read only with -redis-persecond"},
		{[]string{"-redis", "a:1", "-redis-persecond", "-redis-persecond-url", "b"}, `-redis-persecond-url "b"`},
		{[]string{"-redis", "a:1", "-redis-persecond", "-redis-persecond-url", "b:1", "-redis-persecond-type", "x"}, `-redis-persecond-type "x"`},
	}
	for _, b := range bad {
		_, err := parseFlags(append([]string{"-config", "x"}, b.args...), io.Discard)
		require.Error(t, err, "%v", b.args)
		assert.Contains(t, err.Error(), b.msg)
	}
	assert.Equal(t, "redis://alice:xxxxx@r:1", redactURL("redis://alice:pw@r:1"))
}

// TestRedisAuth: actorlimitd on a redis-server with requirepass and an ACL
// user whose keys are actorlimitd's alone: the user's password from a file
// and the user from the URL, and the default user by -redis-auth, share the
// counts; a wrong password, or a user without the password, is refused at
// start with an error naming the cause (not a silent fall back on the
// local table, whose counts no other process shares).
func TestRedisAuth(t *testing.T) {
	key := secretKeyFile(t)
	rs := redistest.StartConfig(t, redistest.Config{Password: "admin-pw",
		Args: []string{"--requirepass", "admin-pw", "--user", "limiter", "on", ">limiter-pw", "~actorlimitd:*", "+@all"}})
	pw := filepath.Join(t.TempDir(), "pw")
	writeFile(t, pw, "limiter-pw\n")
	a := startWithConfig(t, serveConfig, "-secret-key-file", key, "-redis", "redis://limiter@"+rs.Addr, "-redis-password-file", pw, "-redis-timeout", "2s")
	b := startWithConfig(t, serveConfig, "-secret-key-file", key, "-redis", rs.Addr, "-redis-auth", "admin-pw", "-redis-timeout", "2s")
	var over []bool
	for _, d := range []*daemon{a, b, a, b} {
		resp, err := d.ask(request("web", desc("user", "acl")))
		require.NoError(t, err)
		over = append(over, resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT)
	}
	assert.Equal(t, []bool{false, false, false, true}, over, "3 a year, shared through the one Redis")
	keys, err := rs.Client().Keys(context.Background(), "actorlimitd:*").Result()
	require.NoError(t, err)
	assert.NotEmpty(t, keys)

	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, serveConfig)
	for _, args := range [][]string{
		{"-redis", "redis://limiter:wrong@" + rs.Addr},
		{"-redis", rs.Addr, "-redis-auth", "limiter:admin-pw"},
		{"-redis", rs.Addr},
	} {
		d, err := spawn(t, append([]string{"-config", path, "-secret-key-file", key}, args...)...)
		require.Error(t, err, "%v", args)
		assert.Contains(t, err.Error(), "refused this client", "%v", args)
		assert.Regexp(t, "WRONGPASS|NOAUTH", err.Error(), "%v", args)
		assert.NotContains(t, d.logs.String(), "wrong", "no password in the logs")
		assert.Equal(t, 1, d.exitCode)
	}
}

// TestRedisTLS: actorlimitd on a redis-server that speaks TLS only and
// requires a client certificate, by a rediss:// URL with an ACL user and
// password, the CA and the client certificate by flags. 32 callers get no
// error while the server is restarted (the local fallback decides
// meanwhile), and it decides on Redis again once the server is back. A
// CA that did not sign the server's certificate is refused at start.
func TestRedisTLS(t *testing.T) {
	key := secretKeyFile(t)
	c := newCerts(t)
	srvCert, srvKey := c.issue(t, "redis", 2)
	cliCert, cliKey := c.issue(t, "client", 3)
	cert, err := tls.LoadX509KeyPair(cliCert, cliKey)
	require.NoError(t, err)
	rs := redistest.StartConfig(t, redistest.Config{Password: "admin-pw",
		TLS: &tls.Config{RootCAs: c.pool, Certificates: []tls.Certificate{cert}, ServerName: "127.0.0.1"},
		Args: []string{"--tls-cert-file", srvCert, "--tls-key-file", srvKey, "--tls-ca-cert-file", c.caFile,
			"--tls-auth-clients", "yes", "--requirepass", "admin-pw", "--user", "limiter", "on", ">limiter-pw", "~actorlimitd:*", "+@all"}})
	config := serveConfig + "  - key: gcra_hourly\n    rate_limit: {algorithm: gcra, unit: hour, requests_per_unit: 1000000}\n"
	d := startWithConfig(t, config, "-secret-key-file", key, "-redis", "rediss://limiter:limiter-pw@"+rs.Addr, "-redis-tls-ca", c.caFile,
		"-redis-tls-cert", cliCert, "-redis-tls-key", cliKey, "-redis-timeout", "2s")
	var over []bool
	for range 4 {
		resp, err := d.ask(request("web", desc("user", "tls")))
		require.NoError(t, err)
		over = append(over, resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT)
	}
	assert.Equal(t, []bool{false, false, false, true}, over)
	keys, err := rs.Client().Keys(context.Background(), "actorlimitd:*").Result()
	require.NoError(t, err)
	assert.NotEmpty(t, keys, "the counts are in Redis")

	l := startLoad(d, request("web", desc("gcra_hourly", "load")))
	more := l.more
	eventually(t, 10*time.Second, "load on Redis", more(200))
	rs.Kill()
	eventually(t, 10*time.Second, "load without Redis", more(500))
	rs.Restart()
	eventually(t, 10*time.Second, "load with Redis back", more(200))
	// Redis decides again: the load's key is back in the restarted server.
	eventually(t, 10*time.Second, "counts in the restarted Redis", func() bool {
		k, err := rs.Client().Keys(context.Background(), "actorlimitd:*gcra_hourly*").Result()
		return err == nil && len(k) > 0
	})
	assert.Empty(t, l.end())
	_, body := d.getDebug("/metrics")
	// One outage, and maybe one more when the connections kept from before
	// the restart fail after the first probe's new one answered.
	assert.Regexp(t, `actorlimit_store_outages_total [12]\n`, body)

	other := newCerts(t)
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, serveConfig)
	for _, args := range [][]string{
		{"-redis-tls-ca", other.caFile, "-redis-tls-cert", cliCert, "-redis-tls-key", cliKey}, // a CA that did not sign it
		{"-redis-tls-ca", c.caFile}, // no client certificate
	} {
		bad, err := spawn(t, append([]string{"-config", path, "-secret-key-file", key, "-redis", "rediss://limiter:limiter-pw@" + rs.Addr}, args...)...)
		require.Error(t, err, "%v", args)
		assert.Contains(t, err.Error(), "refused this client", "%v", args)
		assert.Contains(t, err.Error(), "certificate", "%v", args)
		assert.Equal(t, 1, bad.exitCode, "%v", args)
	}
}

// TestRedisClusterDaemon: two actorlimitd processes on a three-node Redis
// Cluster (-redis-type cluster, -redis listing two seeds) share one limit,
// and the counts are spread over the nodes.
func TestRedisClusterDaemon(t *testing.T) {
	key := secretKeyFile(t)
	nodes := redistest.StartClusterOf(t, 3)
	seeds := nodes[0].Addr + ",redis://" + nodes[1].Addr
	a := startWithConfig(t, serveConfig, "-secret-key-file", key, "-redis-type", "cluster", "-redis", seeds, "-redis-timeout", "2s")
	b := startWithConfig(t, serveConfig, "-secret-key-file", key, "-redis-type", "cluster", "-redis", seeds, "-redis-timeout", "2s")
	var over []bool
	for _, d := range []*daemon{a, b, a, b} {
		resp, err := d.ask(request("web", desc("user", "cluster")))
		require.NoError(t, err)
		over = append(over, resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT)
	}
	assert.Equal(t, []bool{false, false, false, true}, over, "3 a year, shared through the cluster")
	for i := range 64 {
		_, err := a.ask(request("web", desc("user", "spread"+string(rune('a'+i%26))+string(rune('a'+i/26)))))
		require.NoError(t, err)
	}
	holding := 0
	for _, n := range nodes {
		k, err := n.Client().Keys(context.Background(), "actorlimitd:*").Result()
		require.NoError(t, err)
		if len(k) > 0 {
			holding++
		}
	}
	assert.Equal(t, 3, holding, "every node holds some of the 65 users' counts")
	_, body := a.getDebug("/metrics")
	assert.Contains(t, body, "actorlimit_store_outages_total 0")
}

// TestRedisPerSecondDaemon: with -redis-persecond, the rules whose unit is
// second are counted on -redis-persecond-url's Redis, the others on
// -redis's; each process's name for its backend says both.
func TestRedisPerSecondDaemon(t *testing.T) {
	key := secretKeyFile(t)
	main, sec := redistest.Start(t), redistest.Start(t)
	config := serveConfig + "  - key: burst\n    rate_limit: {unit: second, requests_per_unit: 2}\n"
	d := startWithConfig(t, config, "-secret-key-file", key, "-redis", main.Addr, "-redis-persecond", "-redis-persecond-url", "redis://"+sec.Addr, "-redis-timeout", "2s")
	for i := range 3 {
		resp, err := d.ask(request("web", desc("burst", "x"), desc("user", "y")))
		require.NoError(t, err)
		assert.Equal(t, uint32(2-i), resp.Statuses[1].LimitRemaining, "request %d: the year's count", i)
	}
	keysOf := func(s *redistest.Server) string {
		k, err := s.Client().Keys(context.Background(), "actorlimitd:*").Result()
		require.NoError(t, err)
		return strings.Join(k, " ")
	}
	assert.Contains(t, keysOf(sec), "burst")
	assert.NotContains(t, keysOf(sec), "user")
	assert.Contains(t, keysOf(main), "user")
	assert.NotContains(t, keysOf(main), "burst")
}

// daemonLoad is 32 callers asking a daemon until ended.
type daemonLoad struct {
	stop     atomic.Bool
	answered atomic.Int64
	mu       sync.Mutex
	errs     []error
	wg       sync.WaitGroup
}

// startLoad starts 32 callers sending req to d.
func startLoad(d *daemon, req *rlsv3.RateLimitRequest) *daemonLoad {
	l := &daemonLoad{}
	client := d.client()
	for range 32 {
		l.wg.Go(func() {
			for !l.stop.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := client.ShouldRateLimit(ctx, req)
				cancel()
				if err != nil {
					l.mu.Lock()
					if len(l.errs) < 5 {
						l.errs = append(l.errs, err)
					}
					l.mu.Unlock()
				}
				l.answered.Add(1)
			}
		})
	}
	return l
}

// more returns a condition that holds once n more requests than now are
// answered.
func (l *daemonLoad) more(n int64) func() bool {
	at := l.answered.Load()
	return func() bool { return l.answered.Load() >= at+n }
}

// end stops the callers and returns the first errors they got.
func (l *daemonLoad) end() []error {
	l.stop.Store(true)
	l.wg.Wait()
	return l.errs
}

// TestRedisSentinelDaemon: actorlimitd on a primary and a replica with
// requirepass, watched by three sentinels with a password of their own,
// given as envoy ratelimit gives them (-redis "<master>,<sentinel>,...",
// -redis-auth, -redis-sentinel-auth). 32 callers get no error while the
// primary is killed and the sentinels promote the replica, and the counts
// go on on the new primary.
func TestRedisSentinelDaemon(t *testing.T) {
	key := secretKeyFile(t)
	ss := redistest.StartSentinels(t, redistest.SentinelsConfig{Password: "data-pw", SentinelPassword: "sentinel-pw"})
	config := serveConfig + "  - key: gcra_hourly\n    rate_limit: {algorithm: gcra, unit: hour, requests_per_unit: 1000000}\n"
	d := startWithConfig(t, config, "-secret-key-file", key, "-redis-type", "sentinel", "-redis", ss.Master+","+strings.Join(ss.Addrs, ","),
		"-redis-auth", "data-pw", "-redis-sentinel-auth", "sentinel-pw", "-redis-timeout", "2s")
	var over []bool
	for range 4 {
		resp, err := d.ask(request("web", desc("user", "sentinel")))
		require.NoError(t, err)
		over = append(over, resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT)
	}
	assert.Equal(t, []bool{false, false, false, true}, over)
	keys, err := ss.Primary.Client().Keys(context.Background(), "actorlimitd:*").Result()
	require.NoError(t, err)
	assert.NotEmpty(t, keys, "the counts are on the primary")

	l := startLoad(d, request("web", desc("gcra_hourly", "load")))
	eventually(t, 10*time.Second, "load on the primary", l.more(200))
	ss.Primary.Kill()
	ss.WaitPromoted(ss.Replica.Addr)
	eventually(t, 20*time.Second, "the load's counts on the new primary", func() bool {
		ok := true
		for _, k := range []string{"*gcra_hourly*", "*sentinel*"} {
			k, err := ss.Replica.Client().Keys(context.Background(), "actorlimitd:"+k).Result()
			ok = ok && err == nil && len(k) > 0
		}
		return ok
	})
	eventually(t, 10*time.Second, "load on the new primary", l.more(200))
	assert.Empty(t, l.end())
	// The store may still decide on its local fallback (an outage during
	// the failover), and it probes Redis only when asked: ask on another
	// id until it has said Redis answers again, so the last check is
	// Redis's.
	eventually(t, 20*time.Second, "the store back on Redis", func() bool {
		_, _ = d.ask(request("web", desc("gcra_hourly", "probe")))
		logs := d.logs.String()
		return strings.Count(logs, "redis answers again") >= strings.Count(logs, "redis unavailable")
	})
	resp, err := d.ask(request("web", desc("user", "sentinel")))
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.OverallCode, "the replica had the user's count")
}

// TestRedisUnixSocket: -redis takes a socket path, as a unix:// URL and
// bare (envoy ratelimit's default REDIS_SOCKET_TYPE), and the counts go
// through it.
func TestRedisUnixSocket(t *testing.T) {
	key := secretKeyFile(t)
	sock := filepath.Join(t.TempDir(), "redis.sock")
	rs := redistest.StartConfig(t, redistest.Config{Args: []string{"--unixsocket", sock, "--unixsocketperm", "700"}})
	a := startWithConfig(t, serveConfig, "-secret-key-file", key, "-redis", "unix://"+sock, "-redis-timeout", "2s")
	b := startWithConfig(t, serveConfig, "-secret-key-file", key, "-redis", sock, "-redis-socket-type", "unix", "-redis-timeout", "2s")
	var over []bool
	for _, d := range []*daemon{a, b, a, b} {
		resp, err := d.ask(request("web", desc("user", "socket")))
		require.NoError(t, err)
		over = append(over, resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT)
	}
	assert.Equal(t, []bool{false, false, false, true}, over, "3 a year, shared through the socket")
	keys, err := rs.Client().Keys(context.Background(), "actorlimitd:*").Result()
	require.NoError(t, err)
	assert.NotEmpty(t, keys)
}
