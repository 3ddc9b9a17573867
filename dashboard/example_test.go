package dashboard_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/analytics"
	"github.com/actorlimit/actorlimit/dashboard"
	"github.com/actorlimit/actorlimit/httpadapter"
)

func Example() {
	lim, err := actorlimit.Start()
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	an, err := analytics.New(analytics.Config{}) // the wall clock, 10 s slots
	if err != nil {
		panic(err)
	}
	defer an.Close()
	mw, err := httpadapter.New(lim, httpadapter.Config{
		Rules: []httpadapter.Rule{{
			Name: "per-ip", GroupBy: []string{"ip"},
			Policy: actorlimit.Policy{Algorithm: actorlimit.SlidingWindow, Limit: 100, Period: time.Minute},
		}},
		Observers: []httpadapter.Observer{an},
	})
	if err != nil {
		panic(err)
	}
	page, err := dashboard.New(an, dashboard.Config{})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", mw.Handler(http.NotFoundHandler()))
	mux.Handle("GET /limits", page) // JSON at /limits?format=json

	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/limits", nil))
	body := w.Body.String()
	fmt.Println(w.Code, w.Header().Get("Content-Type"))
	fmt.Println("heatmaps:", strings.Count(body, `<svg class="heatmap"`))
	// Output:
	// 200 text/html; charset=utf-8
	// heatmaps: 2
}
