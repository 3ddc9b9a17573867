package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/analytics"
	"github.com/actorlimit/actorlimit/dashboard"
	"github.com/actorlimit/actorlimit/httpadapter"
	"github.com/actorlimit/actorlimit/metrics"
)

// admin is what -admin serves: Prometheus metrics at /metrics and the
// analytics page at /limits (its JSON at /limits?format=json), on an
// address of its own so that it need not be public.
type admin struct {
	col       *metrics.Collector
	an        *analytics.Analytics
	observers []httpadapter.Observer
	srv       *http.Server
	errc      chan error
}

// newAdmin makes the collector and the analytics for lim; opts are the
// analytics' (tests pass a fake clock).
func newAdmin(lim *actorlimit.Limiter, acfg analytics.Config) (*admin, error) {
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
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("GET /limits", page)
	return &admin{col: col, an: an, observers: []httpadapter.Observer{col, an}, srv: newServer(mux)}, nil
}

// start serves the admin handlers on ln and says where.
func (a *admin) start(ln net.Listener, stdout io.Writer) {
	a.errc = make(chan error, 1)
	go func() { a.errc <- a.srv.Serve(ln) }()
	fmt.Fprintf(stdout, "admin: metrics at http://%s/metrics, limits page at http://%s/limits\n", ln.Addr(), ln.Addr())
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
