package dashboard_test

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/analytics"
	"github.com/actorlimit/actorlimit/dashboard"
)

// The checks here read HTML as the server sends it and as Chromium
// serializes its DOM, so they take attributes in any order.
var (
	sectionRE = regexp.MustCompile(`(?s)<section class="rule" data-rule="([^"]+)">(.*?)</section>`)
	attrRE    = regexp.MustCompile(`([a-z-]+)="([^"]*)"`)
	cellRE    = regexp.MustCompile(`<rect [^>]*class="cell"[^>]*>`)
	plotRE    = regexp.MustCompile(`<rect [^>]*class="plot"[^>]*>`)
	ytickRE   = regexp.MustCompile(`<text [^>]*class="ytick"[^>]*>([^<]*)</text>`)
	idRE      = regexp.MustCompile(`\sid="([^"]*)"`)
	urlRefRE  = regexp.MustCompile(`url\(#([^)]*)\)`)
)

// sections returns each rule's section of a page: its name and its HTML.
func sections(page string) [][2]string {
	var out [][2]string
	for _, m := range sectionRE.FindAllStringSubmatch(page, -1) {
		out = append(out, [2]string{m[1], m[2]})
	}
	return out
}

// heatmapSVG returns the heatmap of kind ("requests" or "remaining") in a
// rule's section.
func heatmapSVG(section, kind string) string {
	return regexp.MustCompile(`(?s)<svg [^>]*data-kind="` + kind + `"[^>]*>.*?</svg>`).FindString(section)
}

// attrInt returns the integer attribute name of tag.
func attrInt(t *testing.T, tag, name string) int {
	t.Helper()
	for _, m := range attrRE.FindAllStringSubmatch(tag, -1) {
		if m[1] == name {
			n, err := strconv.Atoi(m[2])
			require.NoError(t, err, "%s in %s", name, tag)
			return n
		}
	}
	t.Fatalf("no %s in %s", name, tag)
	return 0
}

// cellAt is a heatmap cell's place in data: its slot (column) and bucket
// (row).
type cellAt struct{ slot, bucket int }

// drawnCells returns the groups of each cell svg draws, after checking
// that each cell sits where a reader would look for it: in its slot's
// column, and on the row that the y axis labels with its bucket's range.
func drawnCells(t *testing.T, label, svg string) map[cellAt]uint32 {
	t.Helper()
	plot := plotRE.FindString(svg)
	require.NotEmpty(t, plot, "%s: the plot area", label)
	plotX := attrInt(t, plot, "x")
	type ytick struct {
		y     int
		label string
	}
	var yticks []ytick
	for _, m := range ytickRE.FindAllStringSubmatch(svg, -1) {
		yticks = append(yticks, ytick{attrInt(t, m[0], "y"), m[1]})
	}
	require.NotEmpty(t, yticks, "%s: y axis labels", label)
	got := map[cellAt]uint32{}
	for _, tag := range cellRE.FindAllString(svg, -1) {
		c := cellAt{attrInt(t, tag, "data-slot"), attrInt(t, tag, "data-bucket")}
		got[c] = uint32(attrInt(t, tag, "data-groups"))
		x, y, w, h := attrInt(t, tag, "x"), attrInt(t, tag, "y"), attrInt(t, tag, "width"), attrInt(t, tag, "height")
		assert.Equal(t, plotX+c.slot*w, x, "%s: the cell of slot %d bucket %d is in its slot's column", label, c.slot, c.bucket)
		var rows []string
		for _, yt := range yticks {
			if yt.y > y && yt.y < y+h {
				rows = append(rows, yt.label)
			}
		}
		assert.Equal(t, []string{dashboard.BucketLabel(c.bucket)}, rows,
			"%s: the cell of slot %d bucket %d is on the row labelled with its range", label, c.slot, c.bucket)
	}
	return got
}

// wantCells returns the non-empty cells of a rule's heatmap of kind in the
// analytics' snapshot.
func wantCells(r analytics.Rule, kind string) map[cellAt]uint32 {
	want := map[cellAt]uint32{}
	for i, sl := range r.Slots {
		h := sl.Requests
		if kind == "remaining" {
			h = sl.Remaining
		}
		for b, n := range h {
			if n > 0 {
				want[cellAt{i, b}] = n
			}
		}
	}
	return want
}

// checkDrivenPage checks a page drawn after drive(slots): for each rule,
// both heatmaps draw exactly the analytics' cells, each in its place; the
// cells are where drive's load put them; the bot heads the top-K table.
func checkDrivenPage(t *testing.T, page string, snap analytics.Snapshot) {
	t.Helper()
	secs := sections(page)
	require.Len(t, secs, 2, "a section per rule:\n%s", page)
	require.Len(t, snap.Rules, 2)
	for i, sec := range secs {
		name, html := sec[0], sec[1]
		rule := snap.Rules[i]
		require.Equal(t, rule.Rule, name, "rules in the snapshot's order")
		for _, kind := range []string{"requests", "remaining"} {
			svg := heatmapSVG(html, kind)
			require.NotEmpty(t, svg, "%s: the %s heatmap", name, kind)
			got := drawnCells(t, name+" "+kind, svg)
			assert.Equal(t, wantCells(rule, kind), got, "%s %s: the analytics' cells, no more, no fewer", name, kind)
			checkLoad(t, name, kind, len(rule.Slots), got)
		}
		tops := regexp.MustCompile(`(?s)<table class="top">.*?<td class="group">([^<]*)</td>`).FindAllStringSubmatch(html, -1)
		require.Len(t, tops, 3, "%s: current, previous and window tables", name)
		for _, top := range tops {
			assert.Contains(t, top[1], botIP, "%s: the bot heads each top-K table", name)
		}
		assert.Contains(t, html, "Heaviest groups since "+rule.WindowStart.Format("15:04:05"), name)
		for _, kind := range []string{"requests", "remaining"} {
			svg := heatmapSVG(html, kind)
			checkXTicks(t, svg, len(rule.Slots))
			assert.Contains(t, svg, ">log scale</text>", "%s %s: the legend says log scale", name, kind)
		}
		assert.NotRegexp(t, `\b1 groups\b|\b1 requests\b`, html, name)
	}
	checkIDs(t, page)
}

// checkLoad checks the cells of drive's load, slot by slot: of the 40
// clients, 10 make 1 request (bucket 1) and 20 make 2 or 3 (bucket 2,
// "2–3"); the bot makes 60 (bucket 6, "32–63"). Under per-ip (100 a
// minute) the bot has 40 left after its first slot (bucket 6) and none
// after the others (bucket 0), where no client is.
func checkLoad(t *testing.T, rule, kind string, slots int, got map[cellAt]uint32) {
	t.Helper()
	require.Positive(t, slots)
	for s := range slots {
		switch {
		case kind == "requests":
			for bucket, n := range map[int]uint32{1: 10, 2: 20, 6: 1} {
				assert.Equal(t, n, got[cellAt{s, bucket}], "%s requests, slot %d, bucket %d", rule, s, bucket)
			}
		case rule == "per-ip" && s == 0:
			assert.Equal(t, uint32(1), got[cellAt{s, 6}], "per-ip remaining, slot 0: the bot has 40 left")
		case rule == "per-ip":
			assert.Equal(t, uint32(1), got[cellAt{s, 0}], "per-ip remaining, slot %d: the bot, at 0", s)
		}
	}
}

// checkIDs checks that every element id on the page is unique and that
// every url(#id) reference names one.
func checkIDs(t *testing.T, page string) {
	t.Helper()
	ids := map[string]int{}
	for _, m := range idRE.FindAllStringSubmatch(page, -1) {
		ids[m[1]]++
	}
	require.NotEmpty(t, ids)
	for id, n := range ids {
		assert.Equal(t, 1, n, "id %q is on %d elements", id, n)
	}
	for _, m := range urlRefRE.FindAllStringSubmatch(page, -1) {
		assert.Contains(t, ids, m[1], "url(#%s) names no element", m[1])
	}
}
