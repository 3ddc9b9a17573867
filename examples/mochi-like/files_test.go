package main

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHiddenFS: the server answers 404 for every path with an element that
// starts with a dot, at any depth, and its directory listings leave such
// entries out; everything else is served.
func TestHiddenFS(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"index.html":        "home",
		"page.txt":          "page",
		"sub/visible.txt":   "visible",
		"sub/.env":          "SECRET=1",
		".git/config":       "[core]",
		".hidden":           "hidden",
		".well-known/x.txt": "dot folder",
		"sub/.dots/inner":   "inner",
		"sub/a.b/c.txt":     "dots inside names are fine",
	} {
		path := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	}
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	t.Cleanup(func() { root.Close() })
	lim := startLimiter(t, newFakeClock())
	h := newHandler(lim, hiddenFS{root.FS()}, testScaleMs, 1000, quiet)

	tests := []struct {
		path       string
		wantStatus int
		wantBody   string // a substring; "" for none
		wantNot    []string
	}{
		{"/page.txt", http.StatusOK, "page", nil},
		{"/sub/visible.txt", http.StatusOK, "visible", nil},
		{"/sub/a.b/c.txt", http.StatusOK, "dots inside", nil},
		{"/.git/config", http.StatusNotFound, "", nil},
		{"/.git/", http.StatusNotFound, "", nil},
		{"/.git", http.StatusNotFound, "", nil},
		{"/.hidden", http.StatusNotFound, "", nil},
		{"/sub/.env", http.StatusNotFound, "", nil},
		{"/sub/.dots/inner", http.StatusNotFound, "", nil},
		{"/.well-known/x.txt", http.StatusNotFound, "", nil},
		{"/sub/../.git/config", http.StatusNotFound, "", nil},
		{"/%2egit/config", http.StatusNotFound, "", nil},
		{"/sub/", http.StatusOK, "visible.txt", []string{".env", ".dots"}},
		{"/", http.StatusOK, "home", nil},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "http://example.test/", nil)
			req.URL.Path = mustUnescape(t, tt.path)
			req.RemoteAddr = "192.0.2.1:5555"
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code == http.StatusMovedPermanently { // FileServer's clean-up redirect
				req.URL.Path = rec.Header().Get("Location")
				rec = httptest.NewRecorder()
				h.ServeHTTP(rec, req)
			}
			assert.Equal(t, tt.wantStatus, rec.Code)
			assert.Contains(t, rec.Body.String(), tt.wantBody)
			for _, s := range tt.wantNot {
				assert.NotContains(t, rec.Body.String(), s)
			}
		})
	}
}

func mustUnescape(t *testing.T, p string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://example.test"+p, nil)
	require.NoError(t, err)
	return req.URL.Path
}

// TestListingKeepsReadDirContract: a listing read n entries at a time
// returns at least one entry or an error for each read, even when whole
// batches are hidden, and never a hidden entry.
func TestListingKeepsReadDirContract(t *testing.T) {
	fsys := fstest.MapFS{
		".a": {}, ".b": {}, ".c": {}, "d": {}, ".e": {}, "f": {},
	}
	d, err := hiddenFS{fsys}.Open(".")
	require.NoError(t, err)
	defer d.Close()
	rd, ok := d.(fs.ReadDirFile)
	require.True(t, ok)
	var names []string
	for {
		entries, err := rd.ReadDir(2)
		if err == io.EOF {
			assert.Empty(t, entries)
			break
		}
		require.NoError(t, err)
		require.NotEmpty(t, entries)
		for _, e := range entries {
			names = append(names, e.Name())
		}
	}
	assert.Equal(t, []string{"d", "f"}, names)
	require.NoError(t, fstest.TestFS(hiddenFS{fsys}, "d", "f"))
}

// TestDefaultDir: the default folder is the example folder beside this
// file (the default is relative to the repository's root), with a page,
// and no dotfile.
func TestDefaultDir(t *testing.T) {
	cfg, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "examples/mochi-like/public", cfg.dir)
	dir := filepath.Join("..", "..", filepath.FromSlash(cfg.dir))
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	require.NoError(t, err)
	assert.Contains(t, string(page), "mochi-like")
}
