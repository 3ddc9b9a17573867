package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/analytics"
	"github.com/actorlimit/actorlimit/dashboard"
	"github.com/actorlimit/actorlimit/httpadapter"
	"github.com/actorlimit/actorlimit/metrics"
)

// adminTokenEnv is the environment variable that gives the admin token
// when -admin-token does not.
const adminTokenEnv = "MOCHI_LIKE_ADMIN_TOKEN"

// readyTimeout bounds each readiness check of /readyz.
const readyTimeout = time.Second

// admin is what -admin serves, on an address of its own so that it need
// not be public: the pages listed at / (adminPages).
type admin struct {
	col       *metrics.Collector
	an        *analytics.Analytics
	observers []httpadapter.Observer
	checks    []readyCheck
	srv       *http.Server
	errc      chan error
}

// readyCheck is one condition of /readyz: ok returns nil when it holds.
type readyCheck struct {
	name string
	ok   func(ctx context.Context) error
}

// adminPage is one page of the admin listener.
type adminPage struct {
	Path, What string
	Token      bool // behind the bearer token, when there is one
}

// adminPages are what / lists, in its order.
var adminPages = []adminPage{
	{"/metrics", "Prometheus metrics: the rules' and the per-peer limit's decisions, the check latency, the limiter's state, Go and process metrics", true},
	{"/limits", "the limits page: per rule, heatmaps of groups by requests and by remaining limit, and the heaviest groups (client addresses)", true},
	{"/limits?format=json", "the same as JSON", true},
	{"/healthz", "200 while the process is alive and serving this listener; nothing else is checked", false},
	{"/readyz", "200 when the limiter answers (started, not closed) and, with -redis, Redis answers a PING; 503 naming the check that failed", false},
}

// newAdmin makes the collector and the analytics for lim; acfg is the
// analytics' configuration (tests pass a fake clock). token, when not
// empty, is the bearer token that /metrics and /limits require. checks are
// /readyz's, after the limiter's own.
func newAdmin(lim *actorlimit.Limiter, acfg analytics.Config, token string, checks ...readyCheck) (*admin, error) {
	col, err := metrics.New(metrics.Config{})
	if err != nil {
		return nil, err
	}
	col.SetLimiter(lim)
	an, err := analytics.New(acfg)
	if err != nil {
		return nil, err
	}
	page, err := dashboard.New(an, dashboard.Config{Title: "mochi-like: rate limits"})
	if err != nil {
		_ = an.Close()
		return nil, err
	}
	reg, err := newRegistry(col)
	if err != nil {
		_ = an.Close()
		return nil, err
	}
	a := &admin{col: col, an: an, observers: []httpadapter.Observer{col, an}}
	a.checks = append([]readyCheck{{"limiter", func(ctx context.Context) error {
		_, err := lim.Stats(ctx)
		return err
	}}}, checks...)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", bearer(token, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	mux.Handle("GET /limits", bearer(token, page))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", a.ready)
	mux.HandleFunc("GET /{$}", index)
	a.srv = newServer(mux)
	return a, nil
}

// newRegistry returns the registry of /metrics: the collector, Go's
// runtime and the process's metrics, and go_build_info.
func newRegistry(col *metrics.Collector) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{
		col,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// bearer lets through only the requests with "Authorization: Bearer
// token"; an empty token lets every request through.
func bearer(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mochi-like admin"`)
			http.Error(w, "a bearer token is required (Authorization: Bearer ...)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ready answers /readyz: 200 and a line per check when every check holds,
// 503 and the failing check's error otherwise.
func (a *admin) ready(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	var b strings.Builder
	status := http.StatusOK
	for _, c := range a.checks {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		err := c.ok(ctx)
		cancel()
		if err != nil {
			status = http.StatusServiceUnavailable
			fmt.Fprintf(&b, "%s: not ready: %v\n", c.name, err)
			continue
		}
		fmt.Fprintf(&b, "%s: ok\n", c.name)
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, b.String())
}

var indexPage = template.Must(template.New("index").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>mochi-like admin</title></head>
<body><h1>mochi-like admin</h1><ul>
{{range .}}<li><a href="{{.Path}}">{{.Path}}</a>: {{.What}}{{if .Token}} (bearer token, when one is set){{end}}</li>
{{end}}</ul></body></html>
`))

// index answers /: the list of the admin pages.
func index(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = indexPage.Execute(w, adminPages)
}

// adminAddr returns the address -admin asks for: a port alone (":9090")
// is on the loopback address 127.0.0.1. public says whether the address
// may be reachable from other machines: anything but a loopback address
// or "localhost".
func adminAddr(s string) (addr string, public bool, err error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", false, fmt.Errorf("-admin %q: want [host]:port, such as :9090 (loopback) or 127.0.0.1:9090: %w", s, err)
	}
	if host == "" {
		return net.JoinHostPort("127.0.0.1", port), false, nil
	}
	if strings.EqualFold(host, "localhost") {
		return s, false, nil
	}
	ip, err := netip.ParseAddr(host)
	return s, err != nil || !ip.IsLoopback(), nil
}

// listenAdmin listens where -admin asks, warning on logger when the
// address may be public.
func listenAdmin(cfg config, logger *slog.Logger) (net.Listener, error) {
	addr, public, err := adminAddr(cfg.admin)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-admin: %w", err)
	}
	if public {
		msg := "mochi-like: the admin listener is on an address other machines may reach; /metrics and /limits (client addresses) are protected by the bearer token"
		if cfg.adminToken == "" {
			msg = "mochi-like: the admin listener is on an address other machines may reach, without a token: anyone who reaches it sees /metrics and /limits (client addresses); bind a loopback address or set -admin-token or " + adminTokenEnv
		}
		logger.Warn(msg, "addr", ln.Addr().String())
	}
	return ln, nil
}

// start serves the admin handlers on ln and says where.
func (a *admin) start(ln net.Listener, stdout io.Writer) {
	a.errc = make(chan error, 1)
	go func() { a.errc <- a.srv.Serve(ln) }()
	fmt.Fprintf(stdout, "admin: pages at http://%s/, metrics at http://%s/metrics, limits page at http://%s/limits\n", ln.Addr(), ln.Addr(), ln.Addr())
}

// close stops the admin server and the analytics.
func (a *admin) close() error {
	var err error
	if a.errc != nil {
		err = shutdown(a.srv, a.errc)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	}
	return errors.Join(err, a.an.Close())
}

// observe tells the observers what the per-peer limit decided, as the
// middleware does for its rules: the rule "per-peer", grouped by peer IP.
func observe(obs []httpadapter.Observer, ip string, res actorlimit.Result, err error) {
	o := httpadapter.Observation{Rule: "per-peer", Action: httpadapter.Block, Group: ip, Result: res}
	switch {
	case err != nil:
		o.Outcome = httpadapter.Failed
	case !res.Allowed:
		o.Outcome = httpadapter.Over
	}
	for _, x := range obs {
		x.Observe(o)
	}
}
