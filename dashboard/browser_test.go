package dashboard_test

import (
	"bytes"
	"context"
	"flag"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/dashboard"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the browser test's screenshot to docs/limits.png")

// chromium returns the path of the browser, or skips the test when it is
// absent and CI is unset (with CI set, a missing browser fails the test).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed and CI is set: .ci/run installs it (apt-get install chromium)")
	}
	t.Skip("chromium is not installed (apt-get install chromium); skipped because CI is unset")
	return ""
}

// headless runs the browser on url with args and returns its stdout.
func headless(t *testing.T, bin, url string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), "chromium: %s", errb.String())
	return out.Bytes()
}

// TestBrowserRendersPage loads the page, after a mixed load of normal
// clients and a bot, in a real headless Chromium: the DOM it builds has
// both heatmaps of each rule with the cells where the load was, each in
// its slot's column and on its bucket's labelled row, unique element ids,
// the bot at the top of each rule's three tables (current slot, previous
// slot, the kept window), the rules in the rule set's order, x-axis labels
// every n-th column and never overlapping, "log scale" in each legend, no
// "1 groups" (checkDrivenPage, the same checks as on the server's HTML);
// its screenshot is a PNG of the page.
func TestBrowserRendersPage(t *testing.T) {
	bin := chromium(t)
	an, _ := drive(t, 90) // 15 minutes: more columns than labels fit
	h, err := dashboard.New(an, dashboard.Config{Title: "actorlimit: limits"})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()

	dom := string(headless(t, bin, srv.URL+"/limits", "--dump-dom"))
	checkDrivenPage(t, dom, an.Snapshot())

	shot := filepath.Join(t.TempDir(), "limits.png")
	headless(t, bin, srv.URL+"/limits", "--screenshot="+shot, "--window-size=1400,1500", "--hide-scrollbars")
	png, err := os.ReadFile(shot)
	require.NoError(t, err)
	require.Greater(t, len(png), 10_000, "a screenshot with something on it")
	assert.Equal(t, []byte("\x89PNG\r\n\x1a\n"), png[:8])
	if *updateScreenshot {
		require.NoError(t, os.WriteFile(filepath.Join("..", "docs", "limits.png"), png, 0o644))
	}
}
