package httpadapter_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
)

// fixedClock always says the same time, so the examples' output does not
// depend on when they run.
type fixedClock struct{}

func (fixedClock) Now() time.Time { return time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) }

func Example() {
	lim, err := actorlimit.Start(actorlimit.WithClock(fixedClock{}))
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	mw, err := httpadapter.New(lim, httpadapter.Config{Rules: []httpadapter.Rule{{
		Name:    "login",
		When:    []httpadapter.Condition{httpadapter.Method(http.MethodPost), httpadapter.PathExact("/login")},
		GroupBy: []string{"ip"},
		Policy:  actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: 2, Period: time.Minute},
	}}})
	if err != nil {
		panic(err)
	}
	app := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "welcome\n") })
	handler := mw.Handler(app) // func(http.Handler) http.Handler

	for range 3 {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/login", nil))
		fmt.Print(w.Code, " ", w.Header().Get("RateLimit"))
		if ra := w.Header().Get("Retry-After"); ra != "" {
			fmt.Print(" Retry-After: ", ra)
		}
		fmt.Println()
	}
	fmt.Println(mw.Stats().Rules[0])
	// Output:
	// 200 "login";r=1;t=60
	// 200 "login";r=0;t=60
	// 429 "login";r=0;t=60 Retry-After: 60
	// {login 3 2 1 0 0 0}
}

func ExampleParseRules() {
	rules, err := httpadapter.ParseRules([]byte(`
rules:
  # Try a limit first: monitor never blocks, it only counts.
  - name: search-trial
    when:
      - path: {prefix: /search}
    group_by: [ip]
    policy: {algorithm: fixed_window, limit: 1, period: 1m}
    action: monitor
  # Enforce one: block answers 429 with Retry-After. Grouped by the
  # client's address, which it cannot choose: by Authorization, each
  # made-up token would get a counter of its own.
  - name: api
    when:
      - path: {prefix: /api/}
      - header: {name: X-Internal, present: true}
        not: true
    group_by: [ip]
    policy: {algorithm: fixed_window, limit: 1, period: 1m}
    action: block
`))
	if err != nil {
		panic(err)
	}
	lim, err := actorlimit.Start(actorlimit.WithClock(fixedClock{}))
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	mw, err := httpadapter.New(lim, httpadapter.Config{Rules: rules})
	if err != nil {
		panic(err)
	}
	handler := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, d := range httpadapter.MonitorDecisions(r.Context()) {
			fmt.Printf("(%s would block: %v)\n", d.Rule, !d.Result.Allowed)
		}
	}))
	for _, path := range []string{"/search?q=a", "/search?q=b", "/api/items", "/api/items"} {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		fmt.Println(path, w.Code)
	}
	for _, s := range mw.Stats().Rules {
		fmt.Printf("%s: matched %d, allowed %d, blocked %d, monitored %d\n", s.Rule, s.Matched, s.Allowed, s.Blocked, s.Monitored)
	}
	// Output:
	// (search-trial would block: false)
	// /search?q=a 200
	// (search-trial would block: true)
	// /search?q=b 200
	// /api/items 200
	// /api/items 429
	// search-trial: matched 2, allowed 1, blocked 0, monitored 1
	// api: matched 2, allowed 1, blocked 1, monitored 0
}
