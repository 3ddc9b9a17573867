// Command rlsreport turns the output of bench/rls's benchmarks
// (BenchmarkRLS, BenchmarkRLSFlood; any -count, any BENCH_RLS_ROUNDS) into
// the markdown tables of results/rls.md: the median of each metric per
// sub-benchmark over all its runs, the requests a second with p50 and p99
// per descriptors and clients, and the targets from 16 clients on,
// as ratios computed within each round (actorlimitd's median over the
// floor's in the same round) and then their median over the rounds. A
// round is read from the #01, #02, ... that Go adds to a repeated
// sub-benchmark's name (none: round 0). rls.sh runs it.
//
//	rlsreport < rls.txt > rls.md
//
// Lines starting with '#' are copied first (rls.sh writes the machine and
// the command there).
package main

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		log.Fatal("rlsreport: ", err)
	}
}

// sample is one sub-benchmark's metrics over its runs.
type sample map[string][]float64

var (
	// rlsName is a BenchmarkRLS line's name: Go adds #01, #02, ... to the
	// repeats of a name (BENCH_RLS_ROUNDS's rounds), then -GOMAXPROCS.
	rlsName   = regexp.MustCompile(`^BenchmarkRLS/descriptors=(\d+)/clients=(\d+)/impl=([^ \t#]+?)(?:#(\d+))?(?:-\d+)?$`)
	floodName = regexp.MustCompile(`^BenchmarkRLSFlood/impl=([^ \t#]+?)(?:#\d+)?(?:-\d+)?$`)
	impls     = []string{"floor", "floor-codec", "floor-direct", "actorlimitd", "actorlimitd-redis", "actorlimitd-direct", "actorlimitd-redis-direct", "envoy-ratelimit", "gubernator"}
)

// key is one BenchmarkRLS case, over its rounds.
type key struct {
	desc, clients int
	impl          string
}

// results is what parse read from a benchmark's output.
type results struct {
	header     []string               // the '#' lines, without the '#'
	rls        map[key]map[int]sample // BenchmarkRLS: case -> round -> metrics
	flood      map[string]sample      // BenchmarkRLSFlood: impl -> metrics
	floodOrder []string               // flood's impls in the order of the output
}

// parseName returns the case and the round (0 for a name without a #NN
// suffix) of a BenchmarkRLS line's name; ok is false for any other name.
func parseName(name string) (k key, round int, ok bool) {
	m := rlsName.FindStringSubmatch(name)
	if m == nil {
		return key{}, 0, false
	}
	d, _ := strconv.Atoi(m[1])
	c, _ := strconv.Atoi(m[2])
	if m[4] != "" {
		round, _ = strconv.Atoi(m[4])
	}
	return key{d, c, m[3]}, round, true
}

// parse reads a benchmark's output: the '#' lines, and the metrics of
// every BenchmarkRLS and BenchmarkRLSFlood line (a value followed by its
// unit); other lines are skipped.
func parse(in io.Reader) (*results, error) {
	r := &results{rls: map[key]map[int]sample{}, flood: map[string]sample{}}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			r.header = append(r.header, strings.TrimSpace(strings.TrimPrefix(line, "#")))
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		var s sample
		if k, round, ok := parseName(f[0]); ok {
			if r.rls[k] == nil {
				r.rls[k] = map[int]sample{}
			}
			if r.rls[k][round] == nil {
				r.rls[k][round] = sample{}
			}
			s = r.rls[k][round]
		} else if m := floodName.FindStringSubmatch(f[0]); m != nil {
			if r.flood[m[1]] == nil {
				r.flood[m[1]] = sample{}
				r.floodOrder = append(r.floodOrder, m[1])
			}
			s = r.flood[m[1]]
		} else {
			continue
		}
		// f[1] is b.N; then values, each followed by its unit.
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			s[f[i+1]] = append(s[f[i+1]], v)
		}
	}
	return r, sc.Err()
}

// median returns the median of v; ok is false when v is empty.
func median(v []float64) (float64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	v = slices.Sorted(slices.Values(v))
	if len(v)%2 == 1 {
		return v[len(v)/2], true
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, true
}

// pooled returns the median of metric m over every run of case k, all
// rounds together.
func (r *results) pooled(k key, m string) (float64, bool) {
	var v []float64
	for _, s := range r.rls[k] {
		v = append(v, s[m]...)
	}
	return median(v)
}

// ratio is metric m of case a over case b, round by round.
type ratio struct {
	median, lo, hi float64 // the median of the rounds' ratios, the least, the most
	rounds         int     // rounds that measured both
}

// ratio returns a's metric m over b's, computed within each round (the
// median of a's runs in the round over the median of b's) and then the
// median over the rounds: a drift of the machine slower than a round
// cancels out. ok is false when no round measured both.
func (r *results) ratio(a, b key, m string) (ratio, bool) {
	var rs []float64
	for round, sa := range r.rls[a] {
		x, okX := median(sa[m])
		y, okY := median(r.rls[b][round][m])
		if okX && okY && y != 0 {
			rs = append(rs, x/y)
		}
	}
	med, ok := median(rs)
	if !ok {
		return ratio{}, false
	}
	return ratio{median: med, lo: slices.Min(rs), hi: slices.Max(rs), rounds: len(rs)}, true
}

// String is "1.05x (0.98-1.12, 5 rounds)", or "1.05x (1 round)".
func (q ratio) String() string {
	if q.rounds == 1 {
		return fmt.Sprintf("%.2fx (1 round)", q.median)
	}
	return fmt.Sprintf("%.2fx (%.2f-%.2f, %d rounds)", q.median, q.lo, q.hi, q.rounds)
}

func run(in io.Reader, out io.Writer) error {
	r, err := parse(in)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(out)
	defer w.Flush()
	for _, h := range r.header {
		fmt.Fprintln(w, h)
		fmt.Fprintln(w)
	}
	var present []string
	for _, im := range impls {
		for k := range r.rls {
			if k.impl == im {
				present = append(present, im)
				break
			}
		}
	}
	for _, d := range []int{1, 3} {
		if !slices.ContainsFunc([]int{1, 16, 64, 256}, func(c int) bool { return measured(r.rls, d, c) }) {
			continue
		}
		fmt.Fprintf(w, "### ShouldRateLimit, %d descriptor(s) a request: requests/s (p50 / p99 µs), the server's CPU a request, medians over every run\n\n", d)
		fmt.Fprintf(w, "| clients | %s |\n|---:|%s\n", strings.Join(present, " | "), strings.Repeat("---:|", len(present)))
		for _, c := range []int{1, 16, 64, 256} {
			if !measured(r.rls, d, c) {
				continue
			}
			fmt.Fprintf(w, "| %d |", c)
			for _, im := range present {
				k := key{d, c, im}
				rps, ok := r.pooled(k, "req/s")
				if !ok {
					fmt.Fprint(w, " – |")
					continue
				}
				p50, _ := r.pooled(k, "p50-µs")
				p99, _ := r.pooled(k, "p99-µs")
				cell := fmt.Sprintf(" %.0f (%.0f / %.0f)", rps, p50, p99)
				if cpu, ok := r.pooled(k, "server-cpu-µs/req"); ok {
					cell += fmt.Sprintf(", %.0f µs CPU", cpu)
				}
				if cmds, ok := r.pooled(k, "redis-cmds/req"); ok {
					cell += fmt.Sprintf(", %.2f Redis cmds", cmds)
				}
				fmt.Fprint(w, cell+" |")
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w)
	}
	// same is the floor on actorlimitd's own transport when the run has
	// one (floor-direct), else the floor on its codec (floor-codec).
	same := "floor-codec"
	if slices.Contains(present, "floor-direct") {
		same = "floor-direct"
	}
	// emb and red are actorlimitd on the embedded table and on Redis with
	// its settings for speed when the run has them (actorlimitd-direct,
	// actorlimitd-redis-direct), else with its defaults.
	emb, red := "actorlimitd", "actorlimitd-redis"
	if slices.Contains(present, "actorlimitd-direct") {
		emb = "actorlimitd-direct"
	}
	if slices.Contains(present, "actorlimitd-redis-direct") {
		red = "actorlimitd-redis-direct"
	}
	fmt.Fprintf(w, "embedded is %s, Redis is %s.\n\n", emb, red)
	fmt.Fprint(w, "### Targets: ratios within each round, their median (least-most over the rounds)\n\n")
	fmt.Fprintf(w, "| descriptors | clients | embedded / floor req/s (>= 1.15 from 16 clients) | embedded / %s req/s (>= 0.95) | embedded / floor p99 (<= 1) | embedded / envoy p99 (< 1) | Redis / envoy req/s (>= 1.3 at 1 client, >= 1.8 from 16) | server CPU a request: embedded / floor | server CPU a request: floor / %s / embedded / Redis / envoy (µs, medians) |\n|---:|---:|---:|---:|---:|---:|---:|---:|---|\n", same, same)
	for _, d := range []int{1, 3} {
		for _, c := range []int{1, 16, 64, 256} {
			if !measured(r.rls, d, c) {
				continue
			}
			k := func(im string) key { return key{d, c, im} }
			// cell is a's metric m over b's, with whether the target is
			// met; none is "–" (no target at c clients).
			cell := func(a, b, m string, met func(float64) bool) string {
				q, ok := r.ratio(k(a), k(b), m)
				switch {
				case !ok:
					return "–"
				case met == nil:
					return q.String()
				case met(q.median):
					return q.String() + ", met"
				}
				return q.String() + ", NOT met"
			}
			var fromSixteen func(float64) bool // no target at 1 client
			if c >= 16 {
				fromSixteen = func(q float64) bool { return q >= 1.15 }
			}
			redis := func(q float64) bool { return q >= 1.8 }
			if c == 1 {
				redis = func(q float64) bool { return q >= 1.3 }
			}
			cpuRatio := "–"
			if q, ok := r.ratio(k(emb), k("floor"), "server-cpu-µs/req"); ok {
				cpuRatio = q.String()
			}
			var cpus []string
			for _, im := range []string{"floor", same, emb, red, "envoy-ratelimit"} {
				if v, ok := r.pooled(k(im), "server-cpu-µs/req"); ok {
					cpus = append(cpus, fmt.Sprintf("%.0f", v))
				} else {
					cpus = append(cpus, "–")
				}
			}
			fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s | %s | %s | %s |\n", d, c,
				cell(emb, "floor", "req/s", fromSixteen),
				cell(emb, same, "req/s", func(q float64) bool { return q >= 0.95 }),
				cell(emb, "floor", "p99-µs", func(q float64) bool { return q <= 1 }),
				cell(emb, "envoy-ratelimit", "p99-µs", func(q float64) bool { return q < 1 }),
				cell(red, "envoy-ratelimit", "req/s", redis),
				cpuRatio, strings.Join(cpus, " / "))
		}
	}
	fmt.Fprintln(w)
	if len(r.floodOrder) > 0 {
		fmt.Fprint(w, "### A flood on one key over its limit, 64 clients, medians\n\n")
		fmt.Fprint(w, "| impl | requests/s | p99 µs | denied share | Redis commands per denied request (target <= 0.01 with the cache) |\n|---|---:|---:|---:|---:|\n")
		for _, im := range r.floodOrder {
			s := r.flood[im]
			rps, _ := median(s["req/s"])
			p99, _ := median(s["p99-µs"])
			den, _ := median(s["denied/req"])
			cmds, ok := median(s["redis-cmds/denied"])
			c := "–"
			if ok {
				c = fmt.Sprintf("%.4f", cmds)
			}
			fmt.Fprintf(w, "| %s | %.0f | %.0f | %.3f | %s |\n", im, rps, p99, den, c)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// measured reports whether any server was measured with d descriptors at
// c clients (a run may leave client counts out).
func measured(rls map[key]map[int]sample, d, c int) bool {
	for k := range rls {
		if k.desc == d && k.clients == c {
			return true
		}
	}
	return false
}
