// Package promtext reads one value from a process's Prometheus metrics
// page, for the benchmarks and simulators that wait on a server's state
// (its cluster's members, the buckets it owns).
package promtext

import (
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Value returns the value of the metric name, without labels, that the
// process serving /metrics at addr (host:port) reports, or -1 when it does
// not answer or has no such line.
func Value(c *http.Client, addr, name string) float64 {
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f
			}
		}
	}
	return -1
}
