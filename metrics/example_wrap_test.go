package metrics_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
	"github.com/actorlimit/actorlimit/metrics"
)

// The middleware's checks and the application's own (here a per-peer
// CheckRate behind the rules) all go through one TimedLimiter, so the
// check-duration histogram counts every check of the process.
func ExampleCollector_WrapLimiter() {
	lim, err := actorlimit.Start()
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	col, err := metrics.New(metrics.Config{})
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)

	timed := col.WrapLimiter(lim)
	mw, err := httpadapter.New(timed, httpadapter.Config{Rules: []httpadapter.Rule{{
		Name: "all", Policy: actorlimit.Policy{Limit: 100, Period: time.Minute},
	}}})
	if err != nil {
		panic(err)
	}
	perPeer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if res, err := timed.CheckRate(r.RemoteAddr, 60_000, 2); err != nil || !res.Allowed {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	app := mw.Handler(perPeer)
	for range 3 {
		app.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}

	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "actorlimit_check_duration_seconds" {
			fmt.Println("checks timed:", mf.GetMetric()[0].GetHistogram().GetSampleCount())
		}
	}
	// Output:
	// checks timed: 6
}
