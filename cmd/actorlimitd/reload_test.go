package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// limitConfig is a domain "r" whose rule for key k allows n a year.
func limitConfig(n int) string {
	return fmt.Sprintf("domain: r\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: %d}\n", n)
}

// limitOf returns the requests_per_unit d answers for key k, checked
// without counting (hits_addend 0).
func limitOf(d *daemon) uint32 {
	resp, err := d.ask(request("r", &ratelimitv3.RateLimitDescriptor{Entries: desc("k", "x").Entries, HitsAddend: wrapperspb.UInt64(0)}))
	if err != nil || resp.Statuses[0].CurrentLimit == nil {
		return 0
	}
	return resp.Statuses[0].CurrentLimit.RequestsPerUnit
}

// seenWithin bounds the wait for a change of the files to be in force. The
// watcher looks every 250 ms and loads within a settle of 50 ms, but how
// long a load then takes is the machine's: the bound is the one a start has
// (a hang, not a slow machine), and the time taken is logged, not asserted.
// That it is the watcher (or the SIGHUP) that loaded, once, is asserted by
// the count of loads d logged.
const seenWithin = 30 * time.Second

// loads returns how many times d logged a configuration loaded.
func loads(d *daemon) int { return strings.Count(d.logs.String(), "configuration loaded") }

// assertLoads asserts that d logged n loads: it waits for the n-th line
// (a load is in force before its line is written), then that there is no
// other.
func assertLoads(t *testing.T, d *daemon, n int, what string) {
	t.Helper()
	eventually(t, seenWithin, what, func() bool { return loads(d) >= n })
	assert.Equal(t, n, loads(d), what)
}

func TestReload(t *testing.T) {
	t.Run("a file written in place", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "config.yaml")
		writeFile(t, path, limitConfig(10))
		d := startDaemon(t, "-config", path)
		require.Equal(t, uint32(10), limitOf(d))
		// A hit that must survive the reload: the rule's counter is kept.
		_, err := d.ask(request("r", desc("k", "x")))
		require.NoError(t, err)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		require.NoError(t, err)
		_, err = f.WriteString(limitConfig(20))
		require.NoError(t, err)
		require.NoError(t, f.Close())
		took := eventually(t, seenWithin, "the change in place", func() bool { return limitOf(d) == 20 })
		t.Logf("seen after %v", took)
		assertLoads(t, d, 2, "the start's load and the watcher's")
		resp, err := d.ask(request("r", desc("k", "x")))
		require.NoError(t, err)
		assert.Equal(t, uint32(18), resp.Statuses[0].LimitRemaining, "the count of before the reload is kept")
	})
	t.Run("a file replaced by rename", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "config.yaml")
		writeFile(t, path, limitConfig(10))
		d := startDaemon(t, "-config", path)
		writeFile(t, filepath.Join(dir, ".new"), limitConfig(30))
		require.NoError(t, os.Rename(filepath.Join(dir, ".new"), path))
		t.Logf("seen after %v", eventually(t, seenWithin, "the rename", func() bool { return limitOf(d) == 30 }))
		assertLoads(t, d, 2, "the start's load and the watcher's")
	})
	t.Run("a Kubernetes ConfigMap's ..data symlink swap", func(t *testing.T) {
		dir := t.TempDir()
		version := func(name string, n int) {
			require.NoError(t, os.Mkdir(filepath.Join(dir, name), 0o755))
			writeFile(t, filepath.Join(dir, name, "r.yaml"), limitConfig(n))
		}
		version("..2026_11_27_v1", 10)
		require.NoError(t, os.Symlink("..2026_11_27_v1", filepath.Join(dir, "..data")))
		require.NoError(t, os.Symlink("..data/r.yaml", filepath.Join(dir, "r.yaml")))
		d := startDaemon(t, "-config", dir)
		require.Equal(t, uint32(10), limitOf(d))
		// What the kubelet does: a new version directory, a new link,
		// renamed over ..data, the old version removed.
		version("..2026_11_27_v2", 40)
		require.NoError(t, os.Symlink("..2026_11_27_v2", filepath.Join(dir, "..data_tmp")))
		require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
		require.NoError(t, os.RemoveAll(filepath.Join(dir, "..2026_11_27_v1")))
		t.Logf("seen after %v", eventually(t, seenWithin, "the symlink swap", func() bool { return limitOf(d) == 40 }))
		assertLoads(t, d, 2, "the start's load and the watcher's")
	})
	t.Run("a bad file keeps the configuration in force", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "config.yaml")
		writeFile(t, path, limitConfig(10))
		d := startDaemon(t, "-config", path)
		writeFile(t, path, "domain: r\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: 5, bogus: 1}\n")
		eventually(t, 5*time.Second, "the error logged", func() bool {
			return strings.Contains(d.logs.String(), "config.yaml:4:52: unknown field")
		})
		assert.Equal(t, uint32(10), limitOf(d))
		_, body := d.getDebug("/metrics")
		assert.Contains(t, body, `actorlimitd_config_loads_total{result="error"} 1`)
		writeFile(t, path, limitConfig(50))
		eventually(t, seenWithin, "the good file again", func() bool { return limitOf(d) == 50 })
	})
	t.Run("SIGHUP", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "config.yaml")
		writeFile(t, path, limitConfig(10))
		d := startDaemon(t, "-config", path, "-watch-every", "0")
		writeFile(t, path, limitConfig(60))
		d.signal(syscall.SIGHUP)
		eventually(t, seenWithin, "the SIGHUP", func() bool { return limitOf(d) == 60 })
		assertLoads(t, d, 2, "the start's load and the SIGHUP's")
	})
	t.Run("SIGHUP during a watch", func(t *testing.T) {
		// The watcher looks every 10 ms while the file is replaced (by
		// rename, so that no load can see it half written) and SIGHUPs
		// sent between the replacements: the two load under one lock, so
		// whichever runs last loads the last file, and no load fails.
		dir := t.TempDir()
		path := filepath.Join(dir, "config.yaml")
		writeFile(t, path, limitConfig(10))
		d := startDaemon(t, "-config", path, "-watch-every", "10ms")
		for n := 11; n <= 40; n++ {
			writeFile(t, filepath.Join(dir, ".new"), limitConfig(n))
			require.NoError(t, os.Rename(filepath.Join(dir, ".new"), path))
			d.signal(syscall.SIGHUP)
		}
		eventually(t, seenWithin, "the last file", func() bool { return limitOf(d) == 40 })
		assert.NotContains(t, d.logs.String(), "configuration not loaded")
		t.Logf("%d loads", loads(d))
	})
}
