package persist_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/persist"
)

// otherFS is the operating system's file system behind a type of the
// test's own, as a user's wrapper is.
type otherFS struct{ persist.FS }

// TestUnwritableDirectory: Load refuses a directory in which it cannot
// write, with an error naming the path and the cause, or with
// StartUnwritable goes on and says why; it creates a missing directory
// whatever the file system.
func TestUnwritableDirectory(t *testing.T) {
	cases := []struct {
		name  string
		dir   func(t *testing.T, base string) string
		cause string // in the error; "" if the directory can be written
	}{
		{"under a regular file", func(t *testing.T, base string) string {
			require.NoError(t, os.WriteFile(filepath.Join(base, "file"), nil, 0o600))
			return filepath.Join(base, "file", "state")
		}, "not a directory"},
		{"snapshot.tmp a directory", func(t *testing.T, base string) string {
			require.NoError(t, os.MkdirAll(filepath.Join(base, "snapshot.tmp", "x"), 0o750))
			return base
		}, "is a directory"},
		{"missing, on another file system", func(t *testing.T, base string) string {
			return filepath.Join(base, "a", "b")
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := c.dir(t, t.TempDir())
			cfg := persist.Config{FS: otherFS{persist.OS}}
			r, ld, err := newRig(t, dir, cfg)
			if c.cause == "" {
				require.NoError(t, err)
				assert.NoError(t, ld.Unwritable)
				r.hit("a")
				require.NoError(t, r.j.Close())
				got, _, err := reload(t, dir, cfg)
				require.NoError(t, err)
				assert.Equal(t, map[string]int64{"a": 1}, got)
				return
			}
			require.ErrorIs(t, err, persist.ErrUnwritable)
			assert.ErrorContains(t, err, dir)
			assert.ErrorContains(t, err, c.cause)

			cfg.StartUnwritable = true
			r, ld, err = newRig(t, dir, cfg)
			require.NoError(t, err, "served anyway")
			assert.ErrorIs(t, ld.Unwritable, persist.ErrUnwritable)
			assert.Positive(t, r.j.Stats().Errors, "Start's snapshot could not be written")
			r.hit("a")
			assert.Error(t, r.j.Close())
		})
	}
}

// TestFilesOwnerOnly: the files of the state (snapshot, logs) are created
// 0600, and a directory Load creates 0700 (the usual umask, 022, would
// let 0644 and 0755 through): they hold the limiter's ids, which may
// identify clients.
func TestFilesOwnerOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "state")
	r, _, err := newRig(t, dir, persist.Config{})
	require.NoError(t, err)
	r.hit("alice")
	require.NoError(t, r.j.Close())

	for _, d := range []string{dir, filepath.Dir(dir)} {
		fi, err := os.Stat(d)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), d)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	for _, e := range entries {
		fi, err := e.Info()
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), e.Name())
	}
}
