package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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
	before := logged(t, dir)
	assert.Equal(t, uint32(1), remaining(d), "the hit before the restart is kept")
	// The log is written every 100 ms: wait for the write itself (the log
	// grown by the hit's frame), not for a time.
	eventually(t, 15*time.Second, "the hit written to the log", func() bool { return logged(t, dir) > before })
	d.signal(syscall.SIGKILL)
	d.wait(15 * time.Second)

	d = startWithConfig(t, serveConfig, "-persist", dir, "-secret-key-file", key)
	assert.Equal(t, uint32(0), remaining(d), "the hit before the SIGKILL is kept")
}

// logged returns the bytes of the log files ("log-*") in dir. After the
// start's snapshot (written before the process serves), only the flushes of
// the keys changed since write there.
func logged(t *testing.T, dir string) int64 {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "log-*"))
	require.NoError(t, err)
	var n int64
	for _, name := range names {
		st, err := os.Stat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // compacted meanwhile
		}
		require.NoError(t, err)
		n += st.Size()
	}
	return n
}
