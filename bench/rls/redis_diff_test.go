package rls

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/actorlimit/actorlimit/internal/redistest"
)

// TestDifferentialRedis sends one random request stream (drawn as
// TestDifferential draws its first, from RLS_DIFF_SEED or a fresh seed) to
// actorlimitd on a single redis-server, the reference, and to actorlimitd
// on Redis as operators run it: a Redis Cluster of three nodes
// (-redis-type cluster), a primary, a replica and three sentinels, all with
// passwords (-redis-type sentinel, -redis-auth, -redis-sentinel-auth), a
// redis-server with requirepass (-redis-auth), and one with an ACL user
// speaking TLS only with client certificates (rediss://, -redis-tls-*);
// and with a key per window (-redis-window-keys) on the Cluster (its own
// prefix) and on a redis-server of its own.
// Each must answer every request exactly as the reference does (the
// comparer of TestDifferential), and must have kept its counts in its
// Redis: a candidate that fell back on its local table would answer alike
// yet share no count.
//
// RLS_DIFF_REQUESTS (default 2000) is the stream's length.
func TestDifferentialRedis(t *testing.T) {
	seed := diffSeed(t)
	t.Logf("seed %d (RLS_DIFF_SEED=%d replays this run)", seed, seed)
	n := envInt(t, "RLS_DIFF_REQUESTS", 2000)
	if !hasActorlimitd() {
		t.Skip("this tree has no cmd/actorlimitd yet")
	}
	g := newGen(seed)
	files := map[string]string{}
	for i := range 5 {
		d := g.domain(fmt.Sprintf("domain%d", i))
		files[d.Name+".yaml"] = d.yaml()
	}
	cfg := writeConfig(t, files)

	single := startRedis(t)
	ref := rlsClient(t, startActorlimitd(t, cfg, single.Addr))

	// stored reports the keys a candidate's Redis holds, per server.
	type stored func() (map[string]int64, error)
	dbsize := func(servers ...*redistest.Server) stored {
		return func() (map[string]int64, error) {
			out := map[string]int64{}
			for _, s := range servers {
				k, err := s.Client().DBSize(context.Background()).Result()
				if err != nil {
					return nil, fmt.Errorf("DBSIZE on %s: %w", s.Addr, err)
				}
				out[s.Addr] = k
			}
			return out, nil
		}
	}
	// prefixed is dbsize for the keys under one prefix only, for a
	// candidate that shares its Redis with another.
	prefixed := func(prefix string, servers ...*redistest.Server) stored {
		return func() (map[string]int64, error) {
			out := map[string]int64{}
			for _, s := range servers {
				keys, err := s.Client().Keys(context.Background(), prefix+"*").Result()
				if err != nil {
					return nil, fmt.Errorf("KEYS %s* on %s: %w", prefix, s.Addr, err)
				}
				out[s.Addr] = int64(len(keys))
			}
			return out, nil
		}
	}
	type redisCand struct {
		candidate
		stored stored
	}
	var cands []*redisCand
	add := func(name string, s stored, redisURL string, flags ...string) {
		a := startActorlimitd(t, cfg, redisURL, flags...)
		cands = append(cands, &redisCand{candidate{name: name, client: rlsClient(t, a), cmp: newComparer()}, s})
	}

	nodes := redistest.StartClusterOf(t, 3)
	var seeds []string
	for _, s := range nodes {
		seeds = append(seeds, s.Addr)
	}
	add("actorlimitd on a Redis Cluster of three", dbsize(nodes...), strings.Join(seeds, ","), "-redis-type", "cluster")
	add("actorlimitd on a Redis Cluster of three, -redis-window-keys", prefixed("winkeys:", nodes...), strings.Join(seeds, ","),
		"-redis-type", "cluster", "-redis-window-keys", "-redis-key-prefix", "winkeys:")
	wk := startRedis(t)
	add("actorlimitd on one Redis, -redis-window-keys", dbsize(wk), wk.Addr, "-redis-window-keys")

	sent := redistest.StartSentinels(t, redistest.SentinelsConfig{Password: "data-pw", SentinelPassword: "sentinel-pw"})
	add("actorlimitd on Sentinel", dbsize(sent.Primary, sent.Replica), sent.Master+","+strings.Join(sent.Addrs, ","),
		"-redis-type", "sentinel", "-redis-auth", "data-pw", "-redis-sentinel-auth", "sentinel-pw")

	auth := redistest.StartConfig(t, redistest.Config{Password: "admin-pw", Args: []string{"--requirepass", "admin-pw"}})
	add("actorlimitd on Redis with requirepass", dbsize(auth), auth.Addr, "-redis-auth", "admin-pw")

	ca := newTestCA(t)
	srvCert, srvKey := ca.issue(t, "redis")
	cliCert, cliKey := ca.issue(t, "client")
	pair, err := tls.LoadX509KeyPair(cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	secure := redistest.StartConfig(t, redistest.Config{Password: "admin-pw",
		TLS: &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{pair}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12},
		Args: []string{"--tls-cert-file", srvCert, "--tls-key-file", srvKey, "--tls-ca-cert-file", ca.file, "--tls-auth-clients", "yes",
			"--requirepass", "admin-pw", "--user", "limiter", "on", ">limiter-pw", "~actorlimitd:*", "+@all"}})
	add("actorlimitd on Redis with an ACL user and TLS", dbsize(secure), "rediss://limiter:limiter-pw@"+secure.Addr,
		"-redis-tls-ca", ca.file, "-redis-tls-cert", cliCert, "-redis-tls-key", cliKey)

	history := map[string][]int{}
	var reqs []*rlspb.RateLimitRequest
	const shown = 15 // differences shown in full, per candidate
	for i := range n {
		req := g.request()
		reqs = append(reqs, req)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		from := time.Now().Unix()
		refResp, refErr := ref.ShouldRateLimit(ctx, req)
		if refErr != nil {
			cancel()
			t.Fatalf("request #%d to actorlimitd on a single Redis (seed %d): %v\n%s", i, seed, refErr, text(req))
		}
		resps := make([]*rlspb.RateLimitResponse, len(cands))
		errs := make([]error, len(cands))
		for j, c := range cands {
			resps[j], errs[j] = c.client.ShouldRateLimit(ctx, req)
		}
		tm := timing{From: from, To: time.Now().Unix()}
		cancel()
		for j, c := range cands {
			diffs := c.cmp.compare(req, tm, refResp, resps[j], refErr, errs[j])
			if len(diffs) == 0 {
				continue
			}
			c.diffs++
			if c.diffs <= shown {
				t.Errorf("%s differs from actorlimitd on a single Redis (\"envoy ratelimit\" below) at request #%d (seed %d):\n  request: %s\n  %s\n  single Redis: %s\n  %s: %s%s",
					c.name, i, seed, text(req), strings.Join(diffs, "\n  "), text(refResp), c.name, respText(resps[j], errs[j]),
					earlier(reqs, history, req))
			}
		}
		for _, d := range req.GetDescriptors() {
			k := counterKey(req.GetDomain(), d, 0)
			history[k] = append(history[k], i)
		}
	}
	for _, c := range cands {
		t.Logf("%s: %d requests, %d statuses compared (%v), %d left out (a window started on the way), %d requests differ",
			c.name, n, c.cmp.Compared, c.cmp.Kinds, c.cmp.Skipped, c.diffs)
		for _, k := range []string{"over", "ok", "unlimited", "no-limit"} {
			if c.cmp.Kinds[k] == 0 && n >= 1000 {
				t.Errorf("%s: no status of kind %s among %d: the stream misses a case", c.name, k, c.cmp.Compared)
			}
		}
		if c.cmp.Skipped*20 > c.cmp.Compared {
			t.Errorf("%s: %d statuses left out of %d: too many for the comparison to mean much", c.name, c.cmp.Skipped, c.cmp.Compared)
		}
		keys, err := c.stored()
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		t.Logf("%s: keys in Redis %v", c.name, keys)
		for a, k := range keys {
			if k == 0 && n >= 1000 {
				t.Errorf("%s: no key on %s after %d requests: the counts are not in this Redis (a local fallback?)", c.name, a, n)
			}
		}
	}
	if k, err := single.Client().DBSize(context.Background()).Result(); err != nil || (k == 0 && n >= 1000) {
		t.Errorf("the reference's Redis %s holds %d keys (%v): the reference did not count in Redis", single.Addr, k, err)
	}
	if t.Failed() {
		t.Logf("RLS_DIFF_SEED=%d replays this run", seed)
	}
}

// testCA is a certificate authority of the test's own, in a file, and the
// certificates it signs for 127.0.0.1.
type testCA struct {
	dir, file string
	cert      *x509.Certificate
	key       *ecdsa.PrivateKey
	pool      *x509.CertPool
	serial    int64
}

// newTestCA makes a CA valid for a day and writes it to a file.
func newTestCA(tb testing.TB) *testCA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench/rls test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	ca := &testCA{dir: tb.TempDir(), cert: cert, key: key, pool: x509.NewCertPool(), serial: 1}
	ca.pool.AddCert(cert)
	ca.file = filepath.Join(ca.dir, "ca.pem")
	writePEM(tb, ca.file, "CERTIFICATE", der)
	return ca
}

// issue writes a certificate for 127.0.0.1, good for a server and a
// client, and its key, and returns their files.
func (ca *testCA) issue(tb testing.TB, name string) (certFile, keyFile string) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	ca.serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	certFile, keyFile = filepath.Join(ca.dir, name+".crt"), filepath.Join(ca.dir, name+".key")
	writePEM(tb, certFile, "CERTIFICATE", der)
	writePEM(tb, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEM(tb testing.TB, path, typ string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
}
