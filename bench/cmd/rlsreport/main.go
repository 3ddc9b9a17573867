// Command rlsreport turns the output of bench/rls's benchmarks
// (BenchmarkRLS, BenchmarkRLSFlood; any -count) into the markdown tables of
// results/rls.md: the median of each metric per sub-benchmark, the
// requests a second with p50 and p99 per descriptors and clients, and the
// issue's targets from 16 clients on. rls.sh runs it.
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
	rlsName   = regexp.MustCompile(`^BenchmarkRLS/descriptors=(\d+)/clients=(\d+)/impl=([^ \t]+?)(-\d+)?$`)
	floodName = regexp.MustCompile(`^BenchmarkRLSFlood/impl=([^ \t]+?)(-\d+)?$`)
	impls     = []string{"floor", "floor-codec", "actorlimitd", "actorlimitd-redis", "envoy-ratelimit", "gubernator"}
)

type key struct {
	desc, clients int
	impl          string
}

func run(in io.Reader, out io.Writer) error {
	rls := map[key]sample{}
	flood := map[string]sample{}
	var floodOrder []string
	sc := bufio.NewScanner(in)
	w := bufio.NewWriter(out)
	defer w.Flush()
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			fmt.Fprintln(w, strings.TrimSpace(strings.TrimPrefix(line, "#")))
			fmt.Fprintln(w)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		metrics := sample{}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			metrics[f[i+1]] = append(metrics[f[i+1]], v)
		}
		var s sample
		if m := rlsName.FindStringSubmatch(f[0]); m != nil {
			d, _ := strconv.Atoi(m[1])
			c, _ := strconv.Atoi(m[2])
			k := key{d, c, m[3]}
			if rls[k] == nil {
				rls[k] = sample{}
			}
			s = rls[k]
		} else if m := floodName.FindStringSubmatch(f[0]); m != nil {
			if flood[m[1]] == nil {
				flood[m[1]] = sample{}
				floodOrder = append(floodOrder, m[1])
			}
			s = flood[m[1]]
		} else {
			continue
		}
		for k, v := range metrics {
			s[k] = append(s[k], v...)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	med := func(s sample, m string) (float64, bool) {
		v := slices.Clone(s[m])
		if len(v) == 0 {
			return 0, false
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2], true
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2, true
	}
	var present []string
	for _, im := range impls {
		for k := range rls {
			if k.impl == im {
				present = append(present, im)
				break
			}
		}
	}
	for _, d := range []int{1, 3} {
		fmt.Fprintf(w, "### ShouldRateLimit, %d descriptor(s) a request: requests/s (p50 / p99 µs), the server's CPU a request, medians\n\n", d)
		fmt.Fprintf(w, "| clients | %s |\n|---:|%s\n", strings.Join(present, " | "), strings.Repeat("---:|", len(present)))
		for _, c := range []int{1, 16, 64, 256} {
			if !measured(rls, d, c) {
				continue
			}
			fmt.Fprintf(w, "| %d |", c)
			for _, im := range present {
				s := rls[key{d, c, im}]
				rps, ok := med(s, "req/s")
				if !ok {
					fmt.Fprint(w, " – |")
					continue
				}
				p50, _ := med(s, "p50-µs")
				p99, _ := med(s, "p99-µs")
				cell := fmt.Sprintf(" %.0f (%.0f / %.0f)", rps, p50, p99)
				if cpu, ok := med(s, "server-cpu-µs/req"); ok {
					cell += fmt.Sprintf(", %.0f µs CPU", cpu)
				}
				if cmds, ok := med(s, "redis-cmds/req"); ok {
					cell += fmt.Sprintf(", %.2f Redis cmds", cmds)
				}
				fmt.Fprint(w, cell+" |")
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, "### Targets, from 16 clients on\n\n")
	fmt.Fprint(w, "| descriptors | clients | embedded / floor req/s (>= 1.15) | embedded / floor-codec req/s (>= 0.95) | embedded p99 <= floor p99 | embedded p99 < envoy p99 | Redis / envoy req/s (>= 1.8) | server CPU a request: floor / floor-codec / embedded / Redis / envoy (µs) |\n|---:|---:|---:|---:|---|---|---:|---|\n")
	for _, d := range []int{1, 3} {
		for _, c := range []int{16, 64, 256} {
			if !measured(rls, d, c) {
				continue
			}
			get := func(im, m string) (float64, bool) { return med(rls[key{d, c, im}], m) }
			cell := func(a, b float64, okA, okB bool, min float64) string {
				if !okA || !okB || b == 0 {
					return "–"
				}
				r := a / b
				mark := "met"
				if r < min {
					mark = "NOT met"
				}
				return fmt.Sprintf("%.2fx, %s", r, mark)
			}
			e, okE := get("actorlimitd", "req/s")
			f, okF := get("floor", "req/s")
			r, okR := get("actorlimitd-redis", "req/s")
			v, okV := get("envoy-ratelimit", "req/s")
			ep, okEP := get("actorlimitd", "p99-µs")
			vp, okVP := get("envoy-ratelimit", "p99-µs")
			p99 := "–"
			if okEP && okVP {
				p99 = fmt.Sprintf("%.0f vs %.0f µs, ", ep, vp)
				if ep < vp {
					p99 += "met"
				} else {
					p99 += "NOT met"
				}
			}
			fc, okFC := get("floor-codec", "req/s")
			fp, okFP := get("floor", "p99-µs")
			fp99 := "–"
			if okEP && okFP {
				fp99 = fmt.Sprintf("%.0f vs %.0f µs, ", ep, fp)
				if ep <= fp {
					fp99 += "met"
				} else {
					fp99 += "NOT met"
				}
			}
			var cpus []string
			for _, im := range []string{"floor", "floor-codec", "actorlimitd", "actorlimitd-redis", "envoy-ratelimit"} {
				if v, ok := get(im, "server-cpu-µs/req"); ok {
					cpus = append(cpus, fmt.Sprintf("%.0f", v))
				} else {
					cpus = append(cpus, "–")
				}
			}
			fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s | %s | %s |\n", d, c, cell(e, f, okE, okF, 1.15), cell(e, fc, okE, okFC, 0.95), fp99, p99, cell(r, v, okR, okV, 1.8), strings.Join(cpus, " / "))
		}
	}
	fmt.Fprintln(w)
	if len(floodOrder) > 0 {
		fmt.Fprint(w, "### A flood on one key over its limit, 64 clients, medians\n\n")
		fmt.Fprint(w, "| impl | requests/s | p99 µs | denied share | Redis commands per denied request (target <= 0.01 with the cache) |\n|---|---:|---:|---:|---:|\n")
		for _, im := range floodOrder {
			s := flood[im]
			rps, _ := med(s, "req/s")
			p99, _ := med(s, "p99-µs")
			den, _ := med(s, "denied/req")
			cmds, ok := med(s, "redis-cmds/denied")
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
func measured(rls map[key]sample, d, c int) bool {
	for k := range rls {
		if k.desc == d && k.clients == c {
			return true
		}
	}
	return false
}
