package dashboard_test

import (
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/analytics"
	"github.com/actorlimit/actorlimit/dashboard"
)

// fixed is a Source that always gives the same snapshot.
type fixed analytics.Snapshot

func (f fixed) Snapshot() analytics.Snapshot { return analytics.Snapshot(f) }

// snapshot returns a snapshot of one rule with n 10 s slots; cells[s] puts
// groups in buckets of slot s (bucket -> groups).
func snapshot(n int, cells map[int]map[int]uint32) analytics.Snapshot {
	start := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	r := analytics.Rule{Rule: "r", Action: "block", Limit: 100}
	for s := range n {
		sl := analytics.Slot{Start: start.Add(time.Duration(s) * 10 * time.Second),
			Requests: make([]uint32, analytics.Buckets), Remaining: make([]uint32, analytics.Buckets)}
		for b, g := range cells[s] {
			sl.Requests[b] = g
		}
		r.Slots = append(r.Slots, sl)
	}
	return analytics.Snapshot{Now: start.Add(time.Duration(n) * 10 * time.Second), SlotSeconds: 10, Rules: []analytics.Rule{r}}
}

func page(t *testing.T, snap analytics.Snapshot) string {
	t.Helper()
	h, err := dashboard.New(fixed(snap), dashboard.Config{})
	require.NoError(t, err)
	w := get(t, h, "/limits")
	require.Equal(t, http.StatusOK, w.Code)
	return w.Body.String()
}

var xtickRE = regexp.MustCompile(`<text [^>]*class="xtick"[^>]*>([^<]*)</text>`)

// xticks returns the x position and the text of each x-axis label of svg.
func xticks(t *testing.T, svg string) (pos []int, labels []string) {
	t.Helper()
	for _, m := range xtickRE.FindAllStringSubmatch(svg, -1) {
		pos = append(pos, attrInt(t, m[0], "x"))
		labels = append(labels, m[1])
	}
	return pos, labels
}

// checkXTicks checks the x-axis labels of a heatmap of n slots: the first
// column is labelled, every n-th after it, at least LabelSpacing pixels
// apart, so that no two overlap, and each with its column's time.
func checkXTicks(t *testing.T, svg string, n int) {
	t.Helper()
	pos, labels := xticks(t, svg)
	require.NotEmpty(t, pos, "%d slots: some label", n)
	assert.Equal(t, "10:00:00", labels[0], "%d slots: the first column is labelled", n)
	for i := 1; i < len(pos); i++ {
		assert.GreaterOrEqual(t, pos[i]-pos[i-1], dashboard.LabelSpacing, "%d slots: labels %d and %d overlap", n, i-1, i)
		assert.Equal(t, pos[1]-pos[0], pos[i]-pos[i-1], "%d slots: labels evenly spaced (every n-th column)", n)
	}
	last, err := time.Parse("15:04:05", labels[len(labels)-1])
	require.NoError(t, err)
	assert.Less(t, last.Sub(time.Date(0, 1, 1, 10, 0, 0, 0, time.UTC)), time.Duration(n)*10*time.Second, "%d slots", n)
}

// TestXLabelsNeverOverlap: whatever the number of slots, the x-axis
// labels are every n-th column, far enough apart not to overlap (it
// printed "14:0814:08:5009:00" when the last column was labelled too).
func TestXLabelsNeverOverlap(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 6, 7, 11, 29, 30, 31, 59, 60, 61, 100, 359, 360, 1000} {
		svg := heatmapSVG(page(t, snapshot(n, map[int]map[int]uint32{0: {1: 1}})), "requests")
		require.NotEmpty(t, svg)
		checkXTicks(t, svg, n)
	}
}

// TestPlurals: one group is "1 group", in the legend and in a cell's
// title; nowhere "1 groups".
func TestPlurals(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cells map[int]map[int]uint32
		want  []string
	}{
		{"one group", map[int]map[int]uint32{0: {3: 1}}, []string{`class="legend legend-max"`, ">1 group</text>", "10:00:00: 1 group at 4–7 requests"}},
		{"two groups", map[int]map[int]uint32{0: {3: 2}}, []string{">2 groups</text>", ">1 group</text>", "10:00:00: 2 groups at 4–7 requests"}},
		{"mixed", map[int]map[int]uint32{0: {1: 40, 6: 1}}, []string{">40 groups</text>", "1 group at 32–63 requests", "40 groups at 1 request<"}},
	} {
		p := page(t, snapshot(3, tt.cells))
		svg := heatmapSVG(p, "requests")
		for _, w := range tt.want {
			assert.Contains(t, svg, w, tt.name)
		}
		assert.NotRegexp(t, `\b1 groups\b|\b1 requests\b`, p, tt.name)
		assert.Contains(t, svg, ">log scale</text>", "%s: the legend says the scale is logarithmic", tt.name)
		assert.Contains(t, p, "darker = more groups, on a log scale", tt.name)
	}
}

// luminance is the relative luminance of a #rrggbb colour (WCAG 2).
func luminance(t *testing.T, hex string) float64 {
	t.Helper()
	require.Len(t, hex, 7, hex)
	var l float64
	for i, w := range []float64{0.2126, 0.7152, 0.0722} {
		v, err := strconv.ParseUint(hex[1+2*i:3+2*i], 16, 8)
		require.NoError(t, err)
		c := float64(v) / 255
		if c <= 0.03928 {
			c /= 12.92
		} else {
			c = math.Pow((c+0.055)/1.055, 2.4)
		}
		l += w * c
	}
	return l
}

func contrast(t *testing.T, a, b string) float64 {
	la, lb := luminance(t, a), luminance(t, b)
	return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)
}

// TestLoneGroupStaysVisible: a cell of one group (a bot) next to cells of
// many normal clients keeps a contrast of at least 3:1 with the plot's
// background (WCAG's bar for graphics), however many the clients; and
// more groups are darker.
func TestLoneGroupStaysVisible(t *testing.T) {
	for _, clients := range []uint32{2, 40, 1000, 1 << 20} {
		p := heatmapSVG(page(t, snapshot(3, map[int]map[int]uint32{0: {1: clients, 2: clients / 2, 6: 1}})), "requests")
		bg := regexp.MustCompile(`class="plot"[^>]*fill="(#[0-9a-f]{6})"`).FindStringSubmatch(p)
		require.NotNil(t, bg)
		fills := map[int]string{}
		for _, tag := range cellRE.FindAllString(p, -1) {
			fills[attrInt(t, tag, "data-bucket")] = regexp.MustCompile(`fill="(#[0-9a-f]{6})"`).FindStringSubmatch(tag)[1]
		}
		require.Len(t, fills, 3, "%d clients", clients)
		assert.GreaterOrEqual(t, contrast(t, fills[6], bg[1]), 3.0, "%d clients: the lone group's cell %s on %s", clients, fills[6], bg[1])
		assert.Less(t, luminance(t, fills[1]), luminance(t, fills[2]), "%d clients: more groups, darker", clients)
		if clients > 2 {
			assert.Less(t, luminance(t, fills[2]), luminance(t, fills[6]), "%d clients", clients)
		}
	}
}

// TestZeroHandler: a Handler not made by New answers 500 naming the
// mistake, never panics.
func TestZeroHandler(t *testing.T) {
	w := get(t, new(dashboard.Handler), "/limits")
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.Equal(t, dashboard.ErrNotMade.Error(), strings.TrimSpace(w.Body.String()))
}
