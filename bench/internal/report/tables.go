package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// writeLimiters writes one table per key set of BenchmarkLimiters.
func (res *results) writeLimiters(w io.Writer) {
	res.writeCost(w, "Limiters", "Cost of one hit", "key",
		"Median ns/op and allocs/op; × is the ratio to the fastest peer (actorlimit excluded) at the same keys and callers.")
}

// writeMiddleware writes one table per key set of BenchmarkMiddleware.
func (res *results) writeMiddleware(w io.Writer) {
	res.writeCost(w, "Middleware", "HTTP middleware, one rule", "client IP",
		"Median ns/op and allocs/op of one request through each middleware, with one limit per client IP that is never reached, "+
			"around the same handler (bare: the handler alone); × is the ratio to the cheapest peer (actorlimit and bare excluded) "+
			"at the same client IPs and callers. allocs/op include the test recorder's copy of the response headers: 1 for bare, "+
			"3 for every middleware (bench/doc.go).")
}

// writeCost writes one table of median ns/op, ratio to the best peer and
// allocs/op per key set of bench, under the heading "title (Benchmark...)";
// key names what the keys count.
func (res *results) writeCost(w io.Writer, bench, title, key, note string) {
	impls, callers := res.values(bench, "impl"), res.values(bench, "callers")
	if len(impls) == 0 {
		return
	}
	fmt.Fprintf(w, "## %s (Benchmark%s)\n\n%s\n", title, bench, note)
	for _, keys := range res.values(bench, "keys") {
		fmt.Fprintf(w, "\n### %s\n\n| impl |", plural(keys, key))
		for _, c := range callers {
			fmt.Fprintf(w, " %s %s ns/op | × |", c, plural1(c, "caller"))
		}
		fmt.Fprintf(w, " allocs/op (%s callers) |\n|---|", strings.Join(callers, " / "))
		fmt.Fprint(w, strings.Repeat("--:|--:|", len(callers)), "--:|\n")
		for _, impl := range impls {
			fmt.Fprintf(w, "| %s |", impl)
			var allocs []string
			for _, c := range callers {
				conf := map[string]string{"impl": impl, "keys": keys, "callers": c}
				ns, ok := res.find("sec/op", bench, conf)
				least, okBest := res.best("sec/op", bench, impls, map[string]string{"keys": keys, "callers": c})
				fmt.Fprintf(w, " %s | %s |", num(ns*1e9, ok), ratio(ns, least, ok && okBest))
				a, ok := res.find("allocs/op", bench, conf)
				allocs = append(allocs, num(a, ok))
			}
			fmt.Fprintf(w, " %s |\n", strings.Join(allocs, " / "))
		}
	}
	fmt.Fprintln(w)
}

// writeMemory writes the bytes per key of BenchmarkMemory.
func (res *results) writeMemory(w io.Writer) {
	const bench = "Memory"
	impls, keys := res.values(bench, "impl"), res.values(bench, "keys")
	if len(impls) == 0 {
		return
	}
	fmt.Fprintln(w, "## Memory (BenchmarkMemory)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Live heap (HeapAlloc after GC) grown by one fixed-window key, median B/key; × is the ratio to the smallest peer; empty is the heap the implementation holds before its first key.")
	fmt.Fprint(w, "\n| impl |")
	for _, k := range keys {
		fmt.Fprintf(w, " B/key at %s keys | × |", group(k))
	}
	fmt.Fprint(w, " empty |\n|---|", strings.Repeat("--:|--:|", len(keys)), "--:|\n")
	for _, impl := range impls {
		fmt.Fprintf(w, "| %s |", impl)
		for _, k := range keys {
			v, ok := res.find("B/key", bench, map[string]string{"impl": impl, "keys": k})
			least, okBest := res.best("B/key", bench, impls, map[string]string{"keys": k})
			fmt.Fprintf(w, " %s | %s |", num(v, ok), ratio(v, least, ok && okBest))
		}
		e, ok := res.find("empty-B", bench, map[string]string{"impl": impl, "keys": keys[0]})
		fmt.Fprintf(w, " %s |\n", bytes(e, ok))
	}
	fmt.Fprintln(w)
}

// writeSweep writes the latencies of BenchmarkSweepUnderLoad, and beside
// them BenchmarkNoSweep's: the same harness with no sweep, for actorlimit
// and for a sync.Mutex around a google/btree.
func (res *results) writeSweep(w io.Writer) {
	const bench = "SweepUnderLoad"
	keys, callers := res.values(bench, "keys"), res.values(bench, "callers")
	if len(keys) == 0 {
		return
	}
	fmt.Fprintln(w, "## CheckRate during a sweep (BenchmarkSweepUnderLoad, BenchmarkNoSweep)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "A sweep deletes the tenth of the entries whose window ended while the callers hit live keys; BenchmarkNoSweep is the same harness with no sweep, for actorlimit and for a sync.Mutex around a google/btree. Medians over the runs of each latency percentile, of the sweep's time and of the number of calls the percentiles rest on.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| entries | callers | run | calls | p50 | p99 | p99.9 | sweep |")
	fmt.Fprintln(w, "|--:|--:|:--|--:|--:|--:|--:|--:|")
	rows := []struct {
		name, bench, impl string
	}{
		{"actorlimit, during a sweep of a tenth", bench, ""},
		{"actorlimit, no sweep", "NoSweep", "actorlimit"},
		{"mutex-btree, no sweep", "NoSweep", "mutex-btree"},
	}
	for _, k := range keys {
		for _, c := range callers {
			for _, r := range rows {
				conf := map[string]string{"keys": k, "callers": c}
				if r.impl != "" {
					conf["impl"] = r.impl
				}
				calls, ok := res.find("calls", r.bench, conf)
				if r.impl != "" && !res.has(r.bench, conf) {
					continue // BenchmarkNoSweep not run
				}
				fmt.Fprintf(w, "| %s | %s | %s | %s |", group(k), c, r.name, num(calls, ok))
				for _, p := range []string{"p50", "p99", "p999"} {
					fmt.Fprintf(w, " %s |", res.latency(r.bench, p, conf))
				}
				ms, ok := res.find("sweep-ms", r.bench, conf)
				fmt.Fprintf(w, " %s |\n", duration(ms*1e6, ok))
			}
		}
	}
	fmt.Fprintln(w)
}

// has reports whether bench's run conf reported any unit.
func (res *results) has(bench string, conf map[string]string) bool {
	for unit := range res.median {
		if _, ok := res.find(unit, bench, conf); ok {
			return true
		}
	}
	return false
}

// latency returns the percentile p of bench's run conf, reported by the
// benchmark in "p-ns" and which benchstat may have turned into seconds.
func (res *results) latency(bench, p string, conf map[string]string) string {
	if v, ok := res.find(p+"-sec", bench, conf); ok {
		return duration(v*1e9, true)
	}
	v, ok := res.find(p+"-ns", bench, conf)
	return duration(v, ok)
}

// num formats x with a space between groups of three digits, no decimals
// from 100 up and one below.
func num(x float64, ok bool) string {
	if !ok {
		return "–"
	}
	if x < 100 {
		return strings.TrimSuffix(fmt.Sprintf("%.1f", x), ".0")
	}
	return group(fmt.Sprintf("%.0f", x))
}

// group puts a space between groups of three digits of a whole number.
func group(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// plural returns "n thing" or "n things", with n's digits grouped.
func plural(n, thing string) string {
	return group(n) + " " + plural1(n, thing)
}

// plural1 returns thing, or things unless n is "1".
func plural1(n, thing string) string {
	if n == "1" {
		return thing
	}
	return thing + "s"
}

func ratio(x, least float64, ok bool) string {
	if !ok || least <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", x/least)
}

func duration(ns float64, ok bool) string {
	switch {
	case !ok:
		return "–"
	case ns < 1e3:
		return fmt.Sprintf("%.0f ns", ns)
	case ns < 1e6:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	default:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	}
}

func bytes(b float64, ok bool) string {
	switch {
	case !ok:
		return "–"
	case b < 1<<10:
		return fmt.Sprintf("%.0f B", b)
	case b < 1<<20:
		return fmt.Sprintf("%.0f KiB", b/(1<<10))
	default:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	}
}

// target is one bound on actorlimit's cost: at most max times the peer's
// (peer "" is the fastest peer) at the given callers ("" at any).
type target struct {
	peer, callers string
	max           float64
}

// targets are the bounds on one CheckRate through actorlimit.
var targets = []target{
	{"mutex-btree", "", 1.0},
	{"mutex-map", "", 1.5},
	{"", "2", 3},
	{"", "256", 2},
}

// writeTargets writes impl=actorlimit's ratios to the peers its targets
// name in BenchmarkLimiters, each marked met or not.
func (res *results) writeTargets(w io.Writer) {
	const bench = "Limiters"
	impls := res.values(bench, "impl")
	if !slices.Contains(impls, "actorlimit") {
		return
	}
	fmt.Fprintln(w, "## actorlimit against its targets (BenchmarkLimiters)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "impl=actorlimit's median ns/op over the median of each peer the targets name, from the same run; ✓ is a target met, ✗ one missed (bound in the heading).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| keys | callers | ns/op | × mutex-btree (≤ 1.0) | × mutex-map (≤ 1.5) | × fastest peer (≤ 3 at 2 callers, ≤ 2 at 256) |")
	fmt.Fprintln(w, "|--:|--:|--:|--:|--:|--:|")
	for _, keys := range res.values(bench, "keys") {
		for _, c := range res.values(bench, "callers") {
			conf := map[string]string{"impl": "actorlimit", "keys": keys, "callers": c}
			ns, ok := res.find("sec/op", bench, conf)
			fmt.Fprintf(w, "| %s | %s | %s |", group(keys), c, num(ns*1e9, ok))
			for _, t := range targets {
				if t.callers != "" && t.callers != c {
					continue
				}
				var peer float64
				var okPeer bool
				if t.peer == "" {
					peer, okPeer = res.best("sec/op", bench, impls, map[string]string{"keys": keys, "callers": c})
				} else {
					peer, okPeer = res.find("sec/op", bench, map[string]string{"impl": t.peer, "keys": keys, "callers": c})
				}
				fmt.Fprintf(w, " %s |", mark(ns, peer, t.max, ok && okPeer))
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w)
}

// mark returns x/peer with ✓ if it is at most max, ✗ if not.
func mark(x, peer, max float64, ok bool) string {
	if !ok || peer <= 0 {
		return "–"
	}
	sign := "✓"
	if x/peer > max {
		sign = "✗"
	}
	return fmt.Sprintf("%.2f %s", x/peer, sign)
}

// writeScaling writes the checks per second of BenchmarkScaling at each
// GOMAXPROCS, and how they grow from the least to the most.
func (res *results) writeScaling(w io.Writer) {
	const bench = "Scaling"
	impls, procs, callers := res.values(bench, "impl"), res.values(bench, "procs"), res.values(bench, "callers")
	if len(impls) == 0 {
		return
	}
	fmt.Fprintln(w, "## Checks per second and cores (BenchmarkScaling)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Median checks per second on 10 000 keys with GOMAXPROCS set to each value; growth is the most procs' over the least's. actorlimit is one limiter actor, actorlimit-shards one a processor (WithShards(GOMAXPROCS)).")
	fmt.Fprint(w, "\n| impl | callers |")
	for _, p := range procs {
		fmt.Fprintf(w, " checks/s, %s %s |", p, plural1(p, "proc"))
	}
	fmt.Fprint(w, " growth |\n|---|--:|", strings.Repeat("--:|", len(procs)), "--:|\n")
	for _, impl := range impls {
		for _, c := range callers {
			fmt.Fprintf(w, "| %s | %s |", impl, c)
			var first, last float64
			var okFirst, okLast bool
			for i, p := range procs {
				v, ok := res.find("checks/s", bench, map[string]string{"impl": impl, "procs": p, "callers": c})
				fmt.Fprintf(w, " %s |", num(v, ok))
				if i == 0 {
					first, okFirst = v, ok
				}
				last, okLast = v, ok
			}
			fmt.Fprintf(w, " %s |\n", growth(last, first, okFirst && okLast && len(procs) > 1))
		}
	}
	fmt.Fprintln(w)
}

func growth(x, base float64, ok bool) string {
	if !ok || base <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", x/base)
}
