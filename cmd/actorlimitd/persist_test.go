package main

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPersistAcrossRestart: on the embedded table with -persist, counts
// survive a restart (SIGTERM, a last snapshot), and a SIGKILL too (the log
// of changes, written every 100 ms).
func TestPersistAcrossRestart(t *testing.T) {
	dir, key := t.TempDir(), secretKeyFile(t)
	remaining := func(d *daemon) uint32 {
		resp, err := d.ask(request("web", desc("user", "kept")))
		require.NoError(t, err)
		return resp.Statuses[0].LimitRemaining
	}
	d := startWithConfig(t, serveConfig, "-persist", dir, "-secret-key-file", key)
	assert.Equal(t, uint32(2), remaining(d))
	d.signal(syscall.SIGTERM)
	require.Equal(t, 0, d.wait(15*time.Second))

	d = startWithConfig(t, serveConfig, "-persist", dir, "-secret-key-file", key)
	assert.Equal(t, uint32(1), remaining(d), "the hit before the restart is kept")
	time.Sleep(500 * time.Millisecond) // the log is written every 100 ms: not a window
	d.signal(syscall.SIGKILL)
	d.wait(15 * time.Second)

	d = startWithConfig(t, serveConfig, "-persist", dir, "-secret-key-file", key)
	assert.Equal(t, uint32(0), remaining(d), "the hit before the SIGKILL is kept")
}
