package dashboard

// pageHTML is the page's template: plain HTML and inline SVG, no script,
// nothing loaded from elsewhere.
const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="{{.Refresh}}">
<title>{{.Title}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 16px 24px; color: #1b1f24; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 4px; border-top: 1px solid #d0d7de; padding-top: 12px; }
h3 { font-size: 14px; margin: 12px 0 2px; }
.meta { color: #57606a; }
.charts { display: flex; flex-wrap: wrap; gap: 8px 32px; }
svg text { font: 11px system-ui, sans-serif; fill: #1b1f24; }
svg .axis { stroke: #57606a; stroke-width: 1; }
table.top { border-collapse: collapse; margin: 4px 0 8px; }
table.top th, table.top td { border: 1px solid #d0d7de; padding: 2px 8px; text-align: left; }
table.top td.n { text-align: right; font-variant-numeric: tabular-nums; }
.tops { display: flex; flex-wrap: wrap; gap: 8px 32px; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<div class="meta">{{.Now}} · one column per {{.Slot}} slot, newest on the right · darker = more groups, on a log scale · refreshes every {{.Refresh}} s · <a href="?format=json">JSON</a></div>
{{if not .Rules}}<p class="empty">No rule has matched a request yet.</p>{{end}}
{{range .Rules}}
<section class="rule" data-rule="{{.Name}}">
<h2>{{.Name}}</h2>
<div class="meta">action {{.Action}} · limit {{.Limit}} · analytics memory at most {{.MemoryKB}} KiB</div>
<div class="charts">
{{template "heatmap" .Requests}}
{{template "heatmap" .Remaining}}
</div>
<div class="tops">
<div><h3>Heaviest groups, current slot</h3>{{template "top" .Top}}</div>
<div><h3>Heaviest groups, previous slot{{if .PrevStart}} ({{.PrevStart}}){{end}}</h3>{{template "top" .PrevTop}}</div>
<div><h3>Heaviest groups since {{.WindowStart}} (each slot's top, summed)</h3>{{template "top" .WindowTop}}</div>
</div>
</section>
{{end}}
</body>
</html>
{{define "top"}}{{if .}}<table class="top">
<thead><tr><th>#</th><th>group</th><th>requests</th><th>overcount at most</th></tr></thead>
<tbody>{{range .}}<tr><td class="n">{{.Rank}}</td><td class="group">{{.Group}}</td><td class="n count">{{.Count}}</td><td class="n">{{.MaxError}}</td></tr>{{end}}</tbody>
</table>{{else}}<p class="meta">none</p>{{end}}{{end}}
{{define "heatmap"}}<figure>
<figcaption><h3>{{.Title}}</h3></figcaption>
<svg class="heatmap" data-kind="{{.Kind}}" width="{{.W}}" height="{{.H}}" viewBox="0 0 {{.W}} {{.H}}" role="img" aria-label="{{.Title}}">
<defs><linearGradient id="{{.ID}}" x1="0" y1="1" x2="0" y2="0">{{range .LegendStops}}<stop offset="{{.Offset}}" stop-color="{{.Color}}"/>{{end}}</linearGradient></defs>
<rect class="plot" x="{{.PlotX}}" y="{{.PlotTop}}" width="{{.PlotW}}" height="{{.PlotH}}" fill="#f6f8fa"/>
{{range .Cells}}<rect class="cell" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" fill="{{.Fill}}" data-slot="{{.Slot}}" data-bucket="{{.Bucket}}" data-groups="{{.Groups}}"><title>{{.Title}}</title></rect>{{end}}
<line class="axis" x1="{{.PlotX}}" y1="{{.PlotBottom}}" x2="{{.PlotX}}" y2="{{.PlotTop}}"/>
<line class="axis" x1="{{.PlotX}}" y1="{{.PlotBottom}}" x2="{{.PlotRight}}" y2="{{.PlotBottom}}"/>
{{$x := .PlotX}}{{range .YTicks}}<text class="ytick" x="{{$x}}" dx="-4" y="{{.Pos}}" text-anchor="end">{{.Label}}</text>{{end}}
{{$b := .PlotBottom}}{{range .XTicks}}<text class="xtick" x="{{.Pos}}" y="{{$b}}" dy="14" text-anchor="middle">{{.Label}}</text>{{end}}
<text class="xlabel" x="{{.PlotX}}" y="{{.H}}" dy="-4">time (UTC) →</text>
<text class="ylabel" transform="translate(12,{{$b}}) rotate(-90)">{{.YLabel}} →</text>
<rect class="legend" x="{{.LegendX}}" y="{{.PlotTop}}" width="14" height="{{.PlotH}}" fill="url(#{{.ID}})" stroke="#d0d7de"/>
<text class="legend legend-max" x="{{.LegendX}}" dx="18" y="{{.PlotTop}}" dy="9">{{.MaxLabel}}</text>
{{if gt .Max 1}}<text class="legend legend-min" x="{{.LegendX}}" dx="18" y="{{.PlotBottom}}">1 group</text>{{end}}
<text class="legend legend-log" x="{{.LegendX}}" y="{{.PlotBottom}}" dy="14">log scale</text>
{{if .Empty}}<text class="empty" x="{{.PlotX}}" dx="8" y="28">no requests yet</text>{{end}}
</svg>
</figure>{{end}}
`
