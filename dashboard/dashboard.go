package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/actorlimit/actorlimit/analytics"
)

// ErrInvalidConfig is wrapped by every error of [New]; test it with
// errors.Is.
var ErrInvalidConfig = errors.New("dashboard: invalid configuration")

// ErrNotMade is what a zero Handler, one not made by [New], answers, with
// status 500: it has nothing to draw.
var ErrNotMade = errors.New("dashboard: the Handler was not made by dashboard.New")

// DefaultRefresh is how often the page reloads itself, by default.
const DefaultRefresh = 10 * time.Second

// Source gives the data to draw; *analytics.Analytics is one. Snapshot must
// be safe for concurrent use.
type Source interface {
	Snapshot() analytics.Snapshot
}

// Config configures [New].
type Config struct {
	// Title heads the page (default "Rate limits").
	Title string
	// Refresh is how often the page reloads itself (default 10 s; at least
	// 1 s).
	Refresh time.Duration
}

// Handler serves the page and its JSON. It is safe for concurrent use.
type Handler struct {
	src     Source
	title   string
	refresh int // seconds
}

// New returns a handler that draws src, or an error naming what is wrong.
func New(src Source, cfg Config) (*Handler, error) {
	if src == nil {
		return nil, fmt.Errorf("%w: source is nil", ErrInvalidConfig)
	}
	h := &Handler{src: src, title: cfg.Title, refresh: int(DefaultRefresh / time.Second)}
	if h.title == "" {
		h.title = "Rate limits"
	}
	switch {
	case cfg.Refresh < 0 || cfg.Refresh > 0 && cfg.Refresh < time.Second:
		return nil, fmt.Errorf("%w: Refresh %v is not 0 or at least 1s", ErrInvalidConfig, cfg.Refresh)
	case cfg.Refresh > 0:
		h.refresh = int(cfg.Refresh / time.Second)
	}
	return h, nil
}

// ServeHTTP answers GET and HEAD: the page, or with ?format=json the
// snapshot as JSON.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.src == nil {
		http.Error(w, ErrNotMade.Error(), http.StatusInternalServerError)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	snap := h.src.Snapshot()
	w.Header().Set("Cache-Control", "no-store")
	switch f := r.URL.Query().Get("format"); f {
	case "json":
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		_ = enc.Encode(snap)
		return
	case "", "html":
	default:
		http.Error(w, fmt.Sprintf("format %q is not html or json", f), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	if err := page.Execute(w, h.view(snap)); err != nil {
		http.Error(w, "rendering failed", http.StatusInternalServerError)
	}
}

// Sizes of the drawing, in pixels.
const (
	cellH   = 14
	plotW   = 720
	marginL = 64
	marginB = 40
	marginT = 10
	legendW = 90
)

type pageView struct {
	Title   string
	Refresh int
	Now     string
	Slot    string
	Rules   []ruleView
}

type ruleView struct {
	Name, Action string
	Limit        int64
	MemoryKB     string
	Requests     heatmap
	Remaining    heatmap
	Top          []topRow
	PrevTop      []topRow
	PrevStart    string
	WindowTop    []topRow
	WindowStart  string
}

type heatmap struct {
	Kind        string // requests or remaining
	ID          string // of its legend's gradient: unique on the page
	Title       string
	YLabel      string
	W, H        int
	PlotX       int
	PlotTop     int
	PlotBottom  int
	PlotRight   int
	PlotW       int
	PlotH       int
	Cells       []cell
	YTicks      []tick
	XTicks      []tick
	Max         uint32
	LegendX     int
	LegendStops []stop
	MaxLabel    string // "1 group", "40 groups"
	Empty       bool
}

type cell struct {
	X, Y, W, H int
	Fill       string
	Slot       int
	Bucket     int
	Groups     uint32
	Title      string
}

type tick struct {
	Pos   int
	Label string
}

type stop struct {
	Offset string
	Color  string
}

type topRow struct {
	Rank     int
	Group    string
	Count    uint64
	MaxError uint64
}

func (h *Handler) view(s analytics.Snapshot) pageView {
	v := pageView{Title: h.title, Refresh: h.refresh, Now: s.Now.UTC().Format("2006-01-02 15:04:05 UTC"),
		Slot: strconv.FormatFloat(s.SlotSeconds, 'f', -1, 64) + " s"}
	for i, r := range s.Rules {
		rv := ruleView{Name: r.Rule, Action: r.Action, Limit: r.Limit,
			MemoryKB:  strconv.FormatFloat(float64(r.MemoryBytes)/1024, 'f', 0, 64),
			Top:       rows(r.Top),
			PrevTop:   rows(r.PreviousTop),
			WindowTop: rows(r.WindowTop)}
		if !r.PreviousStart.IsZero() {
			rv.PrevStart = r.PreviousStart.UTC().Format("15:04:05")
		}
		if !r.WindowStart.IsZero() {
			rv.WindowStart = r.WindowStart.UTC().Format("15:04:05")
		}
		rv.Requests = draw("requests", "Groups by requests per "+v.Slot+" slot", "requests", r.Slots, 0,
			func(sl analytics.Slot) []uint32 { return sl.Requests })
		rv.Remaining = draw("remaining", "Groups by remaining limit at the slot's end", "remaining", r.Slots,
			analytics.BucketOf(r.Limit), func(sl analytics.Slot) []uint32 { return sl.Remaining })
		// Ids by the rule's place on the page, not its name, which may hold
		// anything.
		rv.Requests.ID = "legend-" + strconv.Itoa(i) + "-requests"
		rv.Remaining.ID = "legend-" + strconv.Itoa(i) + "-remaining"
		v.Rules = append(v.Rules, rv)
	}
	return v
}

func rows(top []analytics.TopGroup) []topRow {
	out := make([]topRow, len(top))
	for i, g := range top {
		out[i] = topRow{Rank: i + 1, Group: readable(g.Group), Count: g.Count, MaxError: g.MaxError}
	}
	return out
}

// readable shows a group id of the middleware, a sequence of fields each
// written "length:value" or "-" (a value the request did not have), as the
// values joined by " · ": "12:203.0.113.66" is "203.0.113.66". An id of
// another form (a hashed one, "#..."; one from elsewhere) is shown as it is.
func readable(id string) string {
	var b strings.Builder
	for rest := id; rest != ""; {
		if b.Len() > 0 {
			b.WriteString(" · ")
		}
		if rest[0] == '-' {
			b.WriteByte('-')
			rest = rest[1:]
			continue
		}
		colon := strings.IndexByte(rest, ':')
		if colon <= 0 {
			return id
		}
		n, err := strconv.Atoi(rest[:colon])
		if err != nil || n < 0 || n > len(rest)-colon-1 {
			return id
		}
		b.WriteString(rest[colon+1 : colon+1+n])
		rest = rest[colon+1+n:]
	}
	if b.Len() == 0 {
		return "(all requests)"
	}
	return b.String()
}

// draw lays out one heatmap: a column per slot, a row per bucket from 0 to
// the highest that holds a group (or minTop, the bucket of the limit).
func draw(kind, title, ylabel string, slots []analytics.Slot, minTop int, get func(analytics.Slot) []uint32) heatmap {
	top := max(minTop, 1)
	var most uint32
	for _, sl := range slots {
		for b, n := range get(sl) {
			if n > 0 {
				top = max(top, b)
				most = max(most, n)
			}
		}
	}
	rowsN := max(top+1, 5) // a legend and labels need some height
	cw := max(2, min(24, plotW/max(1, len(slots))))
	hm := heatmap{Kind: kind, Title: title, YLabel: ylabel, PlotX: marginL, PlotW: cw * len(slots),
		PlotTop: marginT, PlotBottom: marginT + rowsN*cellH, Max: most, Empty: most == 0,
		MaxLabel: groups(int64(max(most, 1)))}
	hm.PlotH = rowsN * cellH
	hm.PlotRight = marginL + hm.PlotW
	hm.W = marginL + hm.PlotW + 20 + legendW
	hm.H = hm.PlotBottom + marginB
	hm.LegendX = marginL + hm.PlotW + 20
	for i := 0; i <= 4; i++ {
		f := float64(i) / 4
		hm.LegendStops = append(hm.LegendStops, stop{Offset: strconv.Itoa(i*25) + "%", Color: shade(minShade + (1-minShade)*f)})
	}
	for b := 0; b < rowsN; b++ {
		hm.YTicks = append(hm.YTicks, tick{Pos: hm.PlotBottom - b*cellH - cellH/2 + 4, Label: bucketLabel(b)})
	}
	every := labelEvery(cw)
	for i, sl := range slots {
		if i%every == 0 {
			hm.XTicks = append(hm.XTicks, tick{Pos: marginL + i*cw + cw/2, Label: sl.Start.UTC().Format("15:04:05")})
		}
		for b, n := range get(sl) {
			if n == 0 || b >= rowsN {
				continue
			}
			hm.Cells = append(hm.Cells, cell{
				X: marginL + i*cw, Y: hm.PlotBottom - (b+1)*cellH, W: cw, H: cellH,
				Fill: shade(cellShade(n, most)), Slot: i, Bucket: b, Groups: n,
				Title: fmt.Sprintf("%s: %s at %s", sl.Start.UTC().Format("15:04:05"), groups(int64(n)), bucketOf(b, kind)),
			})
		}
	}
	return hm
}

// LabelSpacing is the least distance, in pixels, between the centres of
// two time labels of a heatmap's x-axis: a label ("10:04:30", 11 px type)
// is about 45 px wide, so labels this far apart never overlap.
const LabelSpacing = 64

// labelEvery returns n such that labelling every n-th column of width cw
// puts the labels at least LabelSpacing apart.
func labelEvery(cw int) int {
	return max(1, (LabelSpacing+cw-1)/cw)
}

// minShade is where on the colour scale a cell of one group is: far
// enough from the background that a lone heavy group (one bot among many
// clients) stands out, as dark as a group count can make it at most.
const minShade = 0.5

// cellShade places a cell of n groups on the colour scale, most being the
// most groups of any cell: logarithmically from minShade (1 group) to 1
// (most groups).
func cellShade(n, most uint32) float64 {
	if most <= 1 {
		return 1
	}
	return minShade + (1-minShade)*math.Log(float64(n))/math.Log(float64(most))
}

// bucketOf names bucket b of a heatmap of kind: "1 request", "4–7
// requests", "0 remaining".
func bucketOf(b int, kind string) string {
	if kind == "requests" && b == 1 {
		return "1 request"
	}
	return bucketLabel(b) + " " + kind
}

// groups says "1 group" or "n groups".
func groups(n int64) string {
	if n == 1 {
		return "1 group"
	}
	return strconv.FormatInt(n, 10) + " groups"
}

// bucketLabel names bucket b's range: "0", "1", "2-3", "4-7", ..., "2^22+".
func bucketLabel(b int) string {
	lo, hi := analytics.BucketRange(b)
	switch {
	case hi < 0:
		return strconv.FormatInt(lo, 10) + "+"
	case lo == hi:
		return strconv.FormatInt(lo, 10)
	}
	return strconv.FormatInt(lo, 10) + "–" + strconv.FormatInt(hi, 10)
}

// shade returns the colour at f in [0, 1] of the scale: from a light blue
// to a dark one.
func shade(f float64) string {
	f = min(1, max(0, f))
	light := [3]float64{222, 235, 247}
	dark := [3]float64{8, 48, 107}
	var c [3]int
	for i := range c {
		c[i] = int(math.Round(light[i] + (dark[i]-light[i])*f))
	}
	return fmt.Sprintf("#%02x%02x%02x", c[0], c[1], c[2])
}

var page = template.Must(template.New("page").Parse(pageHTML))
