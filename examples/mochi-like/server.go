package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
)

// shutdownTimeout bounds the wait for requests in flight at shutdown.
const shutdownTimeout = 10 * time.Second

// overLimitMessage is the body of a 413 answer.
const overLimitMessage = "too many requests from your address"

// unavailableMessage is the body of a 503 answer, sent when the limiter
// cannot decide (it was closed, for instance).
const unavailableMessage = "rate limiter unavailable"

// rateChecker is the check the per-peer limit makes: *actorlimit.Limiter's,
// or the same timed by the metrics (-admin).
type rateChecker interface {
	CheckRate(id string, scaleMs, limit int64) (actorlimit.Result, error)
}

// limitHandler counts every request against its peer IP and passes the
// allowed ones to files.
type limitHandler struct {
	lim     rateChecker
	files   http.Handler
	scaleMs int64
	limit   int64
	obs     []httpadapter.Observer // with -admin: the metrics and analytics
	log     *slog.Logger
	failing atomic.Bool // the limiter's failure was logged, and it has not answered since
}

// newHandler serves files, allowing each peer IP limit requests per window
// of scaleMs milliseconds: the raterlimiter's
// check_rate(Req:get(peer), scaleMs, limit). Requests over the limit get 413
// with a Retry-After header; a limiter error gets 503, logged to log once
// until the limiter answers again. The caller validates scaleMs and limit.
func newHandler(lim rateChecker, files fs.FS, scaleMs, limit int64, log *slog.Logger) *limitHandler {
	return &limitHandler{
		lim:     lim,
		files:   http.FileServerFS(files),
		scaleMs: scaleMs,
		limit:   limit,
		log:     log,
	}
}

func (h *limitHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ip := peerIP(r.RemoteAddr)
	res, err := h.lim.CheckRate(ip, h.scaleMs, h.limit)
	if h.obs != nil {
		observe(h.obs, ip, res, err)
	}
	if err != nil {
		h.logFailing(r, err)
		http.Error(w, unavailableMessage, http.StatusServiceUnavailable)
		return
	}
	h.logAnswering()
	if !res.Allowed {
		if s, ok := retryAfter(res.RetryAfter); ok {
			w.Header().Set("Retry-After", s)
		}
		http.Error(w, overLimitMessage, http.StatusRequestEntityTooLarge)
		return
	}
	h.files.ServeHTTP(w, r)
}

// logFailing logs that the limiter failed, once until it answers again:
// every request meets the failure, and an operator needs one line, not a
// line per request. A client that went away is not the limiter's failure.
func (h *limitHandler) logFailing(r *http.Request, err error) {
	if r.Context().Err() == nil && h.failing.CompareAndSwap(false, true) {
		h.log.Warn("mochi-like: the limiter fails; answering 503 until it answers again (logged once)", "err", err)
	}
}

// logAnswering logs, once, that the limiter answers again after a failure.
func (h *limitHandler) logAnswering() {
	if h.failing.Load() && h.failing.CompareAndSwap(true, false) {
		h.log.Info("mochi-like: the limiter answers again")
	}
}

// peerIP is the group of a request's peer for the per-peer limit, as the
// rules' "ip" groups it: an IPv4 peer is its address ("192.0.2.1:5555"
// gives "192.0.2.1", and so does "[::ffff:192.0.2.1]:80"), an IPv6 peer
// its /64 ("[2001:db8::1]:443" gives "2001:db8::/64"), so that a client
// rotating addresses within its network stays in one group. A RemoteAddr
// without a port is taken whole; one that is not an address is its own
// group.
func peerIP(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return ip.String()
	}
	p, _ := ip.Prefix(peerIPv6Bits) // an IPv6 address without zone: no error
	return p.String()
}

// peerIPv6Bits is how many leading bits of an IPv6 peer make its group,
// as httpadapter.DefaultIPv6Prefix for the rules.
const peerIPv6Bits = httpadapter.DefaultIPv6Prefix

// retryAfter formats d as a Retry-After value: whole seconds, rounded up.
// It reports false when d is negative (actorlimit.Never): no wait will do,
// so there is nothing to say.
func retryAfter(d time.Duration) (string, bool) {
	if d < 0 {
		return "", false
	}
	secs := d / time.Second
	if d%time.Second != 0 {
		secs++
	}
	return strconv.FormatInt(int64(secs), 10), true
}

func newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}

// serve serves srv on ln. With cfg.demo it sends the demo's requests and
// returns; otherwise it serves until ctx is done, then shuts the server
// down gracefully, logging the shutdown's start and end to log.
func serve(ctx context.Context, srv *http.Server, ln net.Listener, cfg config, stdout io.Writer, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if cfg.demo {
		err := demoRequests(ctx, "http://"+ln.Addr().String()+"/", cfg, stdout)
		return errors.Join(err, shutdown(srv, errc))
	}
	fmt.Fprintf(stdout, "serving %s at http://%s/ (%s)\n", cfg.dir, ln.Addr(), peerLimit(cfg))
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintln(stdout, "shutting down")
	log.Info("mochi-like: shutting down: letting the requests in flight finish", "timeout", shutdownTimeout)
	start := time.Now()
	err := shutdown(srv, errc)
	if err != nil {
		log.Error("mochi-like: shutdown", "err", err, "took", time.Since(start))
		return err
	}
	log.Info("mochi-like: server stopped", "took", time.Since(start))
	return nil
}

// peerLimit describes the per-peer limit of cfg; with rules, it applies to
// the requests they let through.
func peerLimit(cfg config) string {
	s := fmt.Sprintf("limit %d per %d ms per peer IP", cfg.limit, cfg.scaleMs)
	if cfg.rules != "" {
		s = "after the rules, " + s
	}
	if cfg.redis != "" {
		s += ", counted in Redis at " + cfg.redis
	}
	return s
}

// shutdown lets requests in flight finish, for at most shutdownTimeout, and
// waits for Serve, whose result is on errc, to return.
func shutdown(srv *http.Server, errc <-chan error) error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(ctx)
	if err != nil {
		srv.Close()
		err = fmt.Errorf("shutdown: %w", err)
	}
	<-errc // http.ErrServerClosed
	return err
}
