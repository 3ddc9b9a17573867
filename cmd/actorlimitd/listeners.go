package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/actorlimit/actorlimit"
	certfiles "github.com/actorlimit/actorlimit/internal/certs"
	"github.com/actorlimit/actorlimit/quota"
	"github.com/actorlimit/actorlimit/service"
	"github.com/actorlimit/actorlimit/service/unary"
)

// Defaults of the edge's flags, and the settings it has no flag for.
const (
	// defaultMaxRequestBytes fits the largest request the default bounds
	// let through (64 descriptors of 16 entries with 256-byte keys and
	// values of a few KB) many times over, and is gRPC's own default.
	defaultMaxRequestBytes = 4 << 20
	defaultMaxStreams      = 100
	defaultMaxInFlight     = 1024
	defaultDebugAddr       = "127.0.0.1:6070"
	// maxInFlightWait is how long a request waits for a slot when its
	// context has no sooner deadline.
	maxInFlightWait = time.Second
	// maxHeaderBytes bounds a request's headers, on gRPC and HTTP.
	maxHeaderBytes = 64 << 10
	// handshakeTimeout bounds a gRPC connection's TLS and HTTP/2
	// handshake.
	handshakeTimeout = 10 * time.Second
)

// gRPC keepalive: a client may ping every 10 s at most (more often, the
// connection is closed with ENHANCE_YOUR_CALM), even without a call in
// flight; the server pings a connection quiet for 2 minutes and closes it
// when the ping is not answered in 20 s.
var (
	keepaliveEnforcement = keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}
	keepaliveServer      = keepalive.ServerParameters{Time: 2 * time.Minute, Timeout: 20 * time.Second}
)

// defaultStreamWorkers is -grpc-stream-workers' default: 8 a CPU. A call
// run on a new goroutine grows its stack as it goes deeper (a tenth of the
// server's CPU at 16 clients, in runtime.newstack), one run by a kept
// goroutine does not; a worker blocked on a Redis round trip is why there
// are several a CPU.
func defaultStreamWorkers() int { return 8 * runtime.GOMAXPROCS(0) }

// listenFlags are the flags of the listeners: sizes, timeouts, client
// certificates, the debug listener, and the table's bound.
type listenFlags struct {
	maxRequestBytes int
	maxStreams      uint
	maxInFlight     int
	streamWorkers   int
	readTimeout     time.Duration
	writeTimeout    time.Duration
	idleTimeout     time.Duration
	tlsClientCA     string
	debugAddr       string
	maxTableEntries int
	transport       transportFlags // transport.go
	deprecatedInUse []string       // warnings to log once the logger is up
}

// registerListenFlags adds the edge's flags to fs, and the per-descriptor
// entries bound with its old name.
func registerListenFlags(fs *flag.FlagSet, f *flags) {
	e := &f.listen
	fs.IntVar(&e.maxRequestBytes, "max-request-bytes", defaultMaxRequestBytes, "bound on a request's size in bytes: gRPC's receive size and POST /json's body")
	fs.UintVar(&e.maxStreams, "max-concurrent-streams", defaultMaxStreams, "bound on a gRPC connection's concurrent calls")
	fs.IntVar(&e.maxInFlight, "max-in-flight", defaultMaxInFlight, "bound on the requests decided at once, gRPC and /json together; a request past it waits for its deadline (1 s at most), then is answered RESOURCE_EXHAUSTED (HTTP 503)")
	fs.IntVar(&e.streamWorkers, "grpc-stream-workers", defaultStreamWorkers(), "gRPC calls are run by this many goroutines kept for the purpose, whose stacks have grown already (a call that finds them all busy gets a goroutine of its own), on either transport; 0: a new goroutine a call, grpc-go's default")
	fs.DurationVar(&e.readTimeout, "http-read-timeout", 10*time.Second, "HTTP listeners: the longest a request's headers and body may take to arrive")
	fs.DurationVar(&e.writeTimeout, "http-write-timeout", 10*time.Second, "HTTP listeners: the longest from a request's headers to the end of its answer")
	fs.DurationVar(&e.idleTimeout, "http-idle-timeout", 2*time.Minute, "HTTP listeners: the longest a kept-alive connection may wait for its next request")
	fs.StringVar(&e.tlsClientCA, "tls-client-ca", "", "CA file (PEM): the gRPC and HTTP listeners require client certificates it signed (with -tls-cert, -tls-key)")
	fs.StringVar(&e.debugAddr, "debug-addr", defaultDebugAddr, "debug listen address, plain HTTP (/metrics, /rlconfig, /debug/pprof/); empty: none")
	fs.IntVar(&e.maxTableEntries, "max-table-entries", actorlimit.DefaultMaxEntries, "bound on the counters held: the embedded table's, or a cluster member's (not with -redis)")
	e.transport.register(fs)
	fs.IntVar(&f.bounds.Entries, "max-descriptor-entries", service.DefaultMaxEntries, "bound on a descriptor's entries")
	fs.Func("max-entries", "deprecated name of -max-descriptor-entries, for one release", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil {
			return err
		}
		f.bounds.Entries = n
		e.deprecatedInUse = append(e.deprecatedInUse, "-max-entries is deprecated and goes in the next release: it is -max-descriptor-entries (the entries of a descriptor; -max-table-entries bounds the table)")
		return nil
	})
}

// check refuses edge flags that cannot work.
func (e *listenFlags) check(f *flags) error {
	switch {
	case e.maxRequestBytes < 1024:
		return fmt.Errorf("-max-request-bytes %d: want at least 1024", e.maxRequestBytes)
	case e.maxStreams < 1 || e.maxStreams > 1<<31:
		return fmt.Errorf("-max-concurrent-streams %d: want 1 to 2^31", e.maxStreams)
	case e.streamWorkers < 0 || e.streamWorkers > 1<<16:
		return fmt.Errorf("-grpc-stream-workers %d: want 0 to 65536", e.streamWorkers)
	case e.maxInFlight < 1:
		return fmt.Errorf("-max-in-flight %d: want at least 1", e.maxInFlight)
	case e.readTimeout <= 0 || e.writeTimeout <= 0 || e.idleTimeout <= 0:
		return errors.New("-http-read-timeout, -http-write-timeout and -http-idle-timeout must be positive")
	case e.tlsClientCA != "" && f.tlsCert == "":
		return errors.New("-tls-client-ca needs -tls-cert and -tls-key: client certificates are asked for in the TLS handshake")
	case e.maxTableEntries < 1:
		return fmt.Errorf("-max-table-entries %d: want at least 1", e.maxTableEntries)
	}
	if err := e.transport.check(f.tracing.on); err != nil {
		return err
	}
	f.cluster.maxEntries = e.maxTableEntries
	return nil
}

// serverTLS returns the listeners' TLS configuration, nil without
// -tls-cert: the certificate is read again at a handshake when its files
// changed; with -tls-client-ca, a client must present a certificate that
// CA signed.
func serverTLS(f flags, log *slog.Logger) (*tls.Config, error) {
	if f.tlsCert == "" {
		return nil, nil
	}
	pair, err := certfiles.NewKeyPair(f.tlsCert, f.tlsKey, log)
	if err != nil {
		return nil, fmt.Errorf("-tls-cert, -tls-key: %w", err)
	}
	c := &tls.Config{GetCertificate: pair.GetCertificate, MinVersion: tls.VersionTLS12}
	if f.listen.tlsClientCA != "" {
		pem, err := os.ReadFile(f.listen.tlsClientCA)
		if err != nil {
			return nil, fmt.Errorf("-tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-tls-client-ca %s: no PEM certificate in the file", f.listen.tlsClientCA)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
		c.VerifyPeerCertificate = requireSAN(f.compat.tlsClientSAN)
	}
	return c, nil
}

// edge is the service's listeners and their servers.
type edge struct {
	grpc       *grpc.Server
	direct     *unary.Server // with -grpc-transport direct; grpc serves the connections it hands off
	health     *health.Server
	http       *http.Server
	debug      *http.Server // nil without -debug-addr
	gl, hl, dl net.Listener
	quota      *quota.Server
}

// openEdge listens on the flags' addresses and sets up the servers, with
// their bounds: gRPC's receive size, streams, keepalive and requests in
// flight; HTTP's timeouts and /json's body.
func openEdge(f flags, srv *service.Server, reg *prometheus.Registry, tr *tracing, ready *atomic.Bool, log *slog.Logger) (*edge, error) {
	tlsConf, err := serverTLS(f, log)
	if err != nil {
		return nil, err
	}
	e := &edge{}
	slots := &inFlight{slots: make(chan struct{}, f.listen.maxInFlight)}
	codec := service.NewCodec(srv)
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(codec),
		grpc.ChainUnaryInterceptor(codec.Interceptor, slots.intercept),
		grpc.MaxRecvMsgSize(f.listen.maxRequestBytes),
		grpc.MaxConcurrentStreams(uint32(f.listen.maxStreams)),
		grpc.MaxHeaderListSize(maxHeaderBytes),
		grpc.KeepaliveEnforcementPolicy(keepaliveEnforcement),
		grpc.KeepaliveParams(f.compat.keepalive(keepaliveServer)),
		grpc.ConnectionTimeout(handshakeTimeout),
	}
	opts = append(opts, f.listen.transport.serverOptions()...)
	if f.listen.streamWorkers > 0 {
		opts = append(opts, grpc.NumStreamWorkers(uint32(f.listen.streamWorkers)))
	}
	if tlsConf != nil && f.listen.transport.kind != transportDirect {
		// With -grpc-transport direct, the direct transport completes the
		// TLS handshake and gives grpc-go the *tls.Conn, or proxies to it
		// on an in-process pipe: grpc-go has no credentials of its own.
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsConf)))
	}
	opts = append(opts, tr.grpcOptions()...)
	e.grpc = grpc.NewServer(opts...)
	rlsv3.RegisterRateLimitServiceServer(e.grpc, srv)
	if e.quota, err = registerQuota(e.grpc, reg, f.config, log); err != nil { // quota.go
		return nil, err
	}
	e.health = health.NewServer()
	healthpb.RegisterHealthServer(e.grpc, e.health)
	if f.listen.transport.kind == transportDirect {
		if e.direct, err = directServer(f, codec, srv, e.health, slots, tlsConf, e.grpc); err != nil {
			return nil, err
		}
	}

	mux := http.NewServeMux()
	mux.Handle("/json", tr.handler("/json", slots.wrap(service.JSONHandlerBounded(srv, int64(f.listen.maxRequestBytes)), int64(f.listen.maxRequestBytes))))
	mux.HandleFunc("GET /healthcheck", func(w http.ResponseWriter, r *http.Request) {
		if !ready.Load() {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "OK\n")
	})
	e.http = f.listen.httpServer(mux, log)
	if f.compat.tlsHTTP {
		e.http.TLSConfig = tlsConf
	}

	if e.gl, err = listen("gRPC", f.grpcAddr, log); err != nil {
		return nil, err
	}
	if e.hl, err = listen("HTTP", f.httpAddr, log); err != nil {
		e.gl.Close()
		return nil, err
	}
	if tlsConf != nil && f.compat.tlsHTTP {
		e.hl = tls.NewListener(e.hl, tlsConf)
	}
	if f.listen.debugAddr != "" {
		if e.dl, err = listen("debug", f.listen.debugAddr, log); err != nil {
			e.gl.Close()
			e.hl.Close()
			return nil, err
		}
		dmux := http.NewServeMux()
		dmux.Handle("GET /rlconfig", service.ConfigHandler(srv))
		dmux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		// Go's profiles, as envoy ratelimit serves them on its debug port.
		dmux.HandleFunc("GET /debug/pprof/", pprof.Index)
		dmux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		dmux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		dmux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		dmux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
		e.debug = f.listen.httpServer(dmux, log)
	}
	return e, nil
}

// httpServer is an HTTP server with the flags' timeouts.
func (ef listenFlags) httpServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: ef.readTimeout, ReadTimeout: ef.readTimeout,
		WriteTimeout: ef.writeTimeout, IdleTimeout: ef.idleTimeout, MaxHeaderBytes: maxHeaderBytes,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
}

// serve serves every listener, sending a failure to errs.
func (e *edge) serve(errs chan<- error) {
	if e.direct != nil {
		go func() {
			if err := e.direct.Serve(e.gl); !errors.Is(err, unary.ErrServerClosed) {
				errs <- err
			}
		}()
	} else {
		go func() { errs <- e.grpc.Serve(e.gl) }()
	}
	go func() {
		if err := e.http.Serve(e.hl); !errors.Is(err, http.ErrServerClosed) {
			errs <- err
		}
	}()
	if e.debug != nil {
		go func() {
			if err := e.debug.Serve(e.dl); !errors.Is(err, http.ErrServerClosed) {
				errs <- err
			}
		}()
	}
}

// stop closes every listener and connection at once.
func (e *edge) stop() {
	if e.direct != nil {
		_ = e.direct.Close()
	}
	e.grpc.Stop()
	_ = e.http.Close()
	if e.debug != nil {
		_ = e.debug.Close()
	}
}

// shutdown stops taking requests, lets those in flight finish within
// grace, and then stops the servers.
func (e *edge) shutdown(grace time.Duration, log *slog.Logger) {
	if e.debug != nil {
		_ = e.debug.Close()
	}
	shutdown(e.grpc, e.direct, e.http, grace, log)
}

// inFlight bounds the requests decided at once, across gRPC and /json.
type inFlight struct{ slots chan struct{} }

// acquire takes a slot, waiting for one until ctx's deadline (at most
// maxInFlightWait); past that, the error is RESOURCE_EXHAUSTED.
func (l *inFlight) acquire(ctx context.Context) error {
	select {
	case l.slots <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(maxInFlightWait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
	case <-t.C:
	}
	return status.Errorf(codes.ResourceExhausted, "%d requests in flight, the bound of -max-in-flight", cap(l.slots))
}

func (l *inFlight) release() { <-l.slots }

// intercept bounds the RateLimitService's calls (not the health
// service's).
func (l *inFlight) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if _, ok := req.(*rlsv3.RateLimitRequest); !ok {
		return handler(ctx, req)
	}
	if err := l.acquire(ctx); err != nil {
		return nil, err
	}
	defer l.release()
	return handler(ctx, req)
}

// wrap bounds h's requests, answering 503 past the bound. The body, up to
// maxBody bytes and one more, is read before a slot is taken, so that a
// client slow to send holds none.
func (l *inFlight) wrap(h http.Handler, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.ContentLength <= maxBody {
			body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
			if err != nil {
				http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if err := l.acquire(r.Context()); err != nil {
			w.Header().Set("Retry-After", "1")
			http.Error(w, status.Convert(err).Message(), http.StatusServiceUnavailable)
			return
		}
		defer l.release()
		h.ServeHTTP(w, r)
	})
}

// The methods -grpc-transport direct serves.
const (
	methodShouldRateLimit = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
	methodHealthCheck     = "/grpc.health.v1.Health/Check"
)

// directServer is -grpc-transport direct's server: the same bounds as
// grpc-go's (receive size, streams, header list, keepalive, handshake
// timeout, connection age, requests in flight, TLS and client
// certificates), the RateLimitService through the codec's DecodeRequest
// and AppendResponse (the grpc-go path's bytes and statuses), the health
// service's Check from hs, and every other connection handed to gs.
func directServer(f flags, codec *service.Codec, srv *service.Server, hs *health.Server, slots *inFlight, tlsConf *tls.Config, gs *grpc.Server) (*unary.Server, error) {
	ka := f.compat.keepalive(keepaliveServer)
	return unary.New(unary.Config{
		Handlers: map[string]unary.Handler{
			methodShouldRateLimit: func(ctx context.Context, _ string, wire, dst []byte) ([]byte, error) {
				req, err := codec.DecodeRequest(wire)
				if err != nil {
					return nil, err
				}
				if err := slots.acquire(ctx); err != nil {
					return nil, err
				}
				resp, err := srv.ShouldRateLimit(ctx, req)
				slots.release()
				if err != nil {
					return nil, err
				}
				return codec.AppendResponse(dst, resp)
			},
			methodHealthCheck: func(ctx context.Context, _ string, wire, dst []byte) ([]byte, error) {
				var req healthpb.HealthCheckRequest
				if err := proto.Unmarshal(wire, &req); err != nil {
					return nil, status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
				}
				resp, err := hs.Check(ctx, &req)
				if err != nil {
					return nil, err
				}
				return proto.MarshalOptions{}.MarshalAppend(dst, resp)
			},
		},
		Fallback:              gs,
		TLS:                   tlsConf,
		MaxConcurrentStreams:  uint32(f.listen.maxStreams),
		MaxRecvMsgSize:        f.listen.maxRequestBytes,
		MaxHeaderListSize:     maxHeaderBytes,
		HandshakeTimeout:      handshakeTimeout,
		KeepaliveTime:         ka.Time,
		KeepaliveTimeout:      ka.Timeout,
		KeepaliveMinTime:      keepaliveEnforcement.MinTime,
		PermitWithoutStream:   keepaliveEnforcement.PermitWithoutStream,
		MaxConnectionAge:      ka.MaxConnectionAge,
		MaxConnectionAgeGrace: ka.MaxConnectionAgeGrace,
		Workers:               f.listen.streamWorkers,
	})
}
