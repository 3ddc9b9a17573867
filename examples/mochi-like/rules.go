package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/actorlimit/actorlimit/httpadapter"
)

// printRules writes what the rules of file enforce, one rule a line, before
// the per-peer limit, which only sees the requests they let through.
func printRules(w io.Writer, file string, rules []httpadapter.Rule) {
	fmt.Fprintf(w, "rules of %s, checked before the per-peer limit:\n", file)
	for _, r := range rules {
		fmt.Fprintf(w, "  %s\n", describeRule(r))
	}
}

// describeRule says what r does, e.g. `per-client: 4 per 30s per ip
// (fixed_window), when method in ["GET"]; over it: 429 (block)`.
func describeRule(r httpadapter.Rule) string {
	var b strings.Builder
	p := r.Policy
	fmt.Fprintf(&b, "%s: %d per %s", r.Name, p.Limit, duration(p.Period))
	if len(r.GroupBy) > 0 {
		b.WriteString(" per " + strings.Join(r.GroupBy, " and "))
	} else {
		b.WriteString(" for all requests together")
	}
	alg, err := p.Algorithm.MarshalText()
	if err != nil {
		alg = []byte(p.Algorithm.String())
	}
	fmt.Fprintf(&b, " (%s", alg)
	if p.Burst > 0 {
		fmt.Fprintf(&b, ", burst %d", p.Burst)
	}
	b.WriteString(")")
	for i, c := range r.When {
		if i == 0 {
			b.WriteString(", when ")
		} else {
			b.WriteString(" and ")
		}
		b.WriteString(c.String())
	}
	switch r.Action.Kind {
	case httpadapter.Monitor:
		b.WriteString("; over it: counted only (monitor)")
	case httpadapter.Shadow:
		fmt.Fprintf(&b, "; over it: a fake %d (shadow)", statusOr(r.Action.Status, http.StatusOK))
	default:
		fmt.Fprintf(&b, "; over it: %d (block)", statusOr(r.Action.Status, http.StatusTooManyRequests))
	}
	return b.String()
}

// statusOr returns status, or def when it is 0 (the action's default).
func statusOr(status, def int) int {
	if status == 0 {
		return def
	}
	return status
}

// duration formats d as a rules file would write it: "30s", "1m", "2h",
// "1h30m"; time.Duration's own form for anything finer than a second.
func duration(d time.Duration) string {
	if d <= 0 || d%time.Second != 0 {
		return d.String()
	}
	var b strings.Builder
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := d / u.unit; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			d -= n * u.unit
		}
	}
	return b.String()
}
