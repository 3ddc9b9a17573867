// Command report turns the CSV that `benchstat -format csv` prints for the
// bench module's benchmarks into the markdown tables of results/limiters.md:
// median ns/op and allocs/op per implementation, key set and callers with
// the ratio to the fastest peer, actorlimit's ratios to the peers its
// targets name, how checks per second grow with GOMAXPROCS, the same for the
// HTTP middlewares, bytes per key, and the latencies during a sweep. It reads the CSV on stdin and
// writes markdown on stdout.
package main

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	res, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	res.write(w)
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

// row is one benchmark: its name's key=value parts, e.g. impl, keys, callers.
type row struct {
	bench string // the name before the first '/', e.g. "Limiters"
	conf  map[string]string
}

// results holds benchstat's medians by unit and benchmark name.
type results struct {
	names  []string       // benchmark names, in the order first seen
	rows   map[string]row // by name
	median map[string]map[string]float64
}

// procs is the -GOMAXPROCS suffix of a benchmark name.
var procs = regexp.MustCompile(`-\d+$`)

// parse reads benchstat's CSV: for each unit a header line ",<unit>,CI"
// after a line naming the input file, then "<name>,<median>,<CI>" rows.
func parse(r io.Reader) (*results, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	res := &results{rows: map[string]row{}, median: map[string]map[string]float64{}}
	unit := ""
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return res, nil
		}
		if err != nil {
			return nil, err
		}
		if len(rec) < 2 {
			continue // goos:, cpu: and blank lines
		}
		name := rec[0]
		switch {
		case name == "" && len(rec) > 2 && rec[2] == "CI":
			unit = rec[1]
			res.median[unit] = map[string]float64{}
			continue
		case name == "" || name == "geomean" || unit == "":
			continue
		}
		v, err := strconv.ParseFloat(rec[1], 64)
		if err != nil {
			return nil, fmt.Errorf("%s, %s: %w", name, unit, err)
		}
		name = procs.ReplaceAllString(name, "")
		if _, ok := res.rows[name]; !ok {
			res.names = append(res.names, name)
			res.rows[name] = parseName(name)
		}
		res.median[unit][name] = v
	}
}

func parseName(name string) row {
	parts := strings.Split(name, "/")
	r := row{bench: parts[0], conf: map[string]string{}}
	for _, p := range parts[1:] {
		if k, v, ok := strings.Cut(p, "="); ok {
			r.conf[k] = v
		}
	}
	return r
}

// values returns the distinct values of key among the rows of bench, in
// numeric order when they are numbers, else in the order first seen.
func (res *results) values(bench, key string) []string {
	var vs []string
	for _, n := range res.names {
		r := res.rows[n]
		if v, ok := r.conf[key]; ok && r.bench == bench && !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	slices.SortStableFunc(vs, func(a, b string) int {
		x, errA := strconv.Atoi(a)
		y, errB := strconv.Atoi(b)
		if errA != nil || errB != nil {
			return 0
		}
		return x - y
	})
	return vs
}

// find returns the median of unit for the benchmark of bench with conf.
func (res *results) find(unit, bench string, conf map[string]string) (float64, bool) {
	for _, n := range res.names {
		r := res.rows[n]
		if r.bench != bench || len(r.conf) != len(conf) {
			continue
		}
		match := true
		for k, v := range conf {
			match = match && r.conf[k] == v
		}
		if match {
			v, ok := res.median[unit][n]
			return v, ok
		}
	}
	return 0, false
}

// isPeer reports whether impl is one of the implementations actorlimit is
// compared against: not actorlimit's own, and not BenchmarkMiddleware's
// bare handler, which limits nothing.
func isPeer(impl string) bool { return !strings.HasPrefix(impl, "actorlimit") && impl != "bare" }

// best returns the least median of unit among the peers for conf (whose
// "impl" is set in turn to each implementation).
func (res *results) best(unit, bench string, impls []string, conf map[string]string) (float64, bool) {
	least, found := 0.0, false
	for _, impl := range impls {
		if !isPeer(impl) {
			continue
		}
		c := map[string]string{"impl": impl}
		for k, v := range conf {
			c[k] = v
		}
		if v, ok := res.find(unit, bench, c); ok && (!found || v < least) {
			least, found = v, true
		}
	}
	return least, found
}

func (res *results) write(w io.Writer) {
	res.writeLimiters(w)
	res.writeTargets(w)
	res.writeScaling(w)
	res.writeMiddleware(w)
	res.writeMemory(w)
	res.writeSweep(w)
}
