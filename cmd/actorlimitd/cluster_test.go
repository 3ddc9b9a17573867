package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/internal/testkit"
)

// TestClusterProcesses: three actorlimitd processes, members of one
// cluster found through the automanaged provider (-cluster-peers) and
// authenticated to each other with mutual TLS (-cluster-tls-*), share
// one limit: in owner mode exactly 30 of 45 hits spread over the three are
// allowed. One member is then SIGKILLed: the two others keep answering
// every request, drop it from their members, and go on limiting.
func TestClusterProcesses(t *testing.T) {
	if raceOn {
		t.Skip("cluster members run without -race (the engine's grpc logger race); CI runs this test without it")
	}
	if testing.Short() {
		t.Skip("starts three processes")
	}
	config := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, config, "domain: c\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: 30}\n")
	ports := freePorts(t, 6)
	var peers []string
	for _, p := range ports[3:] {
		peers = append(peers, "127.0.0.1:"+strconv.Itoa(p))
	}
	c := newCerts(t)
	secretKey := secretKeyFile(t)
	var ds []*daemon
	for i := range 3 {
		cert, key := c.issue(t, fmt.Sprintf("member%d", i), int64(10+i))
		ds = append(ds, startDaemon(t, "-config", config, "-cluster-mode", "owner", "-cluster-name", "test",
			"-cluster-port", strconv.Itoa(ports[i]), "-cluster-peers", strings.Join(peers, ","),
			"-cluster-peer-port", strconv.Itoa(ports[3+i]), "-cluster-dead-after", "2s",
			"-cluster-tls-cert", cert, "-cluster-tls-key", key, "-cluster-tls-ca", c.caFile, "-secret-key-file", secretKey))
	}
	members := clusterMembers
	for i, d := range ds {
		eventually(t, 30*time.Second, fmt.Sprintf("member %d sees 3", i), func() bool { return members(d) == 3 })
	}
	hit := func(d *daemon, id string) bool {
		resp, err := d.ask(request("c", desc("k", id)))
		require.NoError(t, err)
		return resp.OverallCode == rlsv3.RateLimitResponse_OK
	}
	allowed := 0
	for i := range 45 {
		if hit(ds[i%3], "shared") {
			allowed++
		}
	}
	assert.Equal(t, 30, allowed, "one limit shared by three processes")

	ds[2].signal(syscall.SIGKILL)
	ds[2].wait(10 * time.Second)
	// Every request is answered while the dead member is found out.
	allowed = 0
	deadline := time.Now().Add(20 * time.Second)
	for members(ds[0]) != 2 || members(ds[1]) != 2 {
		require.True(t, time.Now().Before(deadline), "the survivors did not drop the dead member")
		for _, d := range ds[:2] {
			if hit(d, "after") {
				allowed++
			}
		}
		time.Sleep(20 * time.Millisecond) // pacing the requests, not waiting for a window
	}
	// With two members, a fresh id is limited at 30 again.
	fresh := 0
	for i := range 40 {
		if hit(ds[i%2], "fresh") {
			fresh++
		}
	}
	assert.Equal(t, 30, fresh, "the two survivors share one limit")
	t.Logf("%d of the hits on \"after\" allowed while the dead member was found out", allowed)
}

// freePorts returns n ports on loopback that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	return testkit.FreePorts(t, n)
}

// TestClusterEtcd: two actorlimitd processes that find each other through
// a real etcd server (-cluster-etcd) share one limit.
func TestClusterEtcd(t *testing.T) {
	if raceOn {
		t.Skip("cluster members run without -race (the engine's grpc logger race); CI runs this test without it")
	}
	endpoint := testkit.StartEtcd(t)
	config := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, config, "domain: c\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: 10}\n")
	var ds []*daemon
	for range 2 {
		ds = append(ds, startDaemon(t, "-config", config, "-cluster-mode", "owner", "-cluster-name", "etcdtest", "-cluster-etcd", endpoint, "-secret-descriptor-keys", ""))
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

// clusterMembers is the actorlimitd_cluster_members d reports.
func clusterMembers(d *daemon) int {
	_, body := d.getDebug("/metrics")
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, "actorlimitd_cluster_members "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}
