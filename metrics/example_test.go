package metrics_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
	"github.com/actorlimit/actorlimit/metrics"
)

func Example() {
	lim, err := actorlimit.Start()
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	col, err := metrics.New(metrics.Config{})
	if err != nil {
		panic(err)
	}
	col.SetLimiter(lim) // entries, evictions, expired, restarts at scrape time
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)

	mw, err := httpadapter.New(col.Wrap(lim), httpadapter.Config{ // Wrap times each limiter call
		Rules: []httpadapter.Rule{{
			Name: "per-ip", GroupBy: []string{"ip"},
			Policy: actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: 2, Period: time.Minute},
		}},
		Observers: []httpadapter.Observer{col}, // per rule counts
	})
	if err != nil {
		panic(err)
	}
	app := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 3 {
		app.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}

	w := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range strings.Split(w.Body.String(), "\n") {
		if strings.HasPrefix(line, "actorlimit_rule_") || strings.HasPrefix(line, "actorlimit_limiter_entries") {
			fmt.Println(line)
		}
	}
	// Output:
	// actorlimit_limiter_entries 1
	// actorlimit_rule_allowed_total{action="block",rule="per-ip"} 2
	// actorlimit_rule_denied_total{action="block",rule="per-ip"} 1
	// actorlimit_rule_errors_total{action="block",rule="per-ip"} 0
	// actorlimit_rule_matched_total{action="block",rule="per-ip"} 3
	// actorlimit_rule_near_limit_total{action="block",rule="per-ip"} 1
}
