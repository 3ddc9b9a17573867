package dashboard_test

import (
	"bytes"
	"context"
	"flag"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
// both heatmaps of each rule with cells where the load was, and the bot at
// the top of each rule's table; its screenshot is a PNG of the page.
func TestBrowserRendersPage(t *testing.T) {
	bin := chromium(t)
	an, _ := drive(t, 30)
	h, err := dashboard.New(an, dashboard.Config{Title: "actorlimit: limits"})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()

	dom := string(headless(t, bin, srv.URL+"/limits", "--dump-dom"))
	sections := regexp.MustCompile(`(?s)<section class="rule" data-rule="([^"]+)">(.*?)</section>`).FindAllStringSubmatch(dom, -1)
	require.Len(t, sections, 2, "a section per rule in the DOM:\n%s", dom)
	for _, sec := range sections {
		for _, kind := range []string{"requests", "remaining"} {
			svg := regexp.MustCompile(`(?s)<svg [^>]*class="heatmap" [^>]*data-kind="` + kind + `".*?</svg>|<svg class="heatmap" data-kind="` + kind + `".*?</svg>`).FindString(sec[2])
			require.NotEmpty(t, svg, "%s: the %s heatmap", sec[1], kind)
			assert.Regexp(t, `<rect class="cell"[^>]*data-groups="[1-9]`, svg, "%s %s: non-empty cells", sec[1], kind)
		}
		top := regexp.MustCompile(`<td class="group">([^<]*)</td>`).FindStringSubmatch(sec[2])
		require.NotNil(t, top, sec[1])
		assert.Contains(t, top[1], botIP, "%s: the bot heads the table", sec[1])
	}

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
