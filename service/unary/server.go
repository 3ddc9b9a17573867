package unary

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Handler answers one unary call: method is the call's path
// ("/package.Service/Method"), req the request message's bytes (valid until
// the handler returns), dst a pooled buffer to append the answer message's
// bytes to. It returns the answer's bytes, which become the server's (it
// pools them once written): dst appended to, or bytes nobody else holds.
// Or it returns an error: a status error
// (google.golang.org/grpc/status) is answered with its status, a context
// error with CANCELLED or DEADLINE_EXCEEDED, any other with UNKNOWN, as
// grpc-go answers a handler's error. ctx ends when the client resets the
// stream, its grpc-timeout passes, or the connection closes; its values
// are Config.BaseContext's.
type Handler func(ctx context.Context, method string, req, dst []byte) ([]byte, error)

// Fallback serves the connections whose first call is not one of
// Config.Handlers' methods: a *grpc.Server, given a listener whose Accept
// returns them, every byte read from each replayed.
type Fallback interface {
	Serve(net.Listener) error
}

// Config configures a Server. Zero fields take grpc-go's server defaults
// unless said otherwise.
type Config struct {
	// Handlers are the methods served, by path. Required.
	Handlers map[string]Handler
	// Fallback serves the other connections; nil: they are closed.
	Fallback Fallback
	// TLS, when set, is the listeners' TLS configuration: the server
	// completes each handshake (ALPN "h2" required) before it reads
	// HTTP/2, and hands the fallback the *tls.Conn.
	TLS *tls.Config
	// MaxConcurrentStreams bounds a connection's calls at once, those
	// reset by the client but still being decided among them (default
	// 100; beyond, REFUSED_STREAM).
	MaxConcurrentStreams uint32
	// MaxRecvMsgSize bounds a request message (default 4 MiB; beyond,
	// RESOURCE_EXHAUSTED, as grpc-go's MaxRecvMsgSize).
	MaxRecvMsgSize int
	// MaxHeaderListSize bounds a request's header list as HTTP/2 counts
	// it (default 16 MiB, grpc-go's).
	MaxHeaderListSize uint32
	// HandshakeTimeout bounds the TLS handshake and the client's preface
	// and first SETTINGS (default 120 s, grpc-go's ConnectionTimeout). A
	// connection that then sends no call for as long is handed to the
	// fallback, whose keepalive then looks after it.
	HandshakeTimeout time.Duration
	// KeepaliveTime is how long a connection may be quiet before the
	// server pings it (default 2 h); KeepaliveTimeout how long the ping's
	// ACK may take before the connection is closed (default 20 s).
	KeepaliveTime, KeepaliveTimeout time.Duration
	// KeepaliveMinTime is the least time between a client's pings
	// (default 5 min): a third ping sooner than that, with no answer sent
	// in between, closes the connection with GOAWAY ENHANCE_YOUR_CALM
	// ("too_many_pings"), as grpc-go's enforcement policy does.
	KeepaliveMinTime time.Duration
	// PermitWithoutStream lets a client ping every KeepaliveMinTime with
	// no call in flight (false: every 2 h).
	PermitWithoutStream bool
	// MaxConnectionAge, when positive, sends GOAWAY to a connection that
	// old; MaxConnectionAgeGrace, when positive, then closes it that much
	// later, calls in flight or not.
	MaxConnectionAge, MaxConnectionAgeGrace time.Duration
	// WriteTimeout bounds each write to a connection (default 20 s): a
	// client that does not read is closed.
	WriteTimeout time.Duration
	// Workers, when positive, is how many goroutines the server keeps to
	// run calls (a call that finds them all busy gets a goroutine of its
	// own): a kept goroutine's stack has grown already, a new one's grows
	// as the handler goes deeper. 0: a new goroutine a call.
	Workers int
	// BaseContext holds the values of every call's context (default
	// context.Background()); its end does not end the calls.
	BaseContext context.Context
}

// Errors of a Server.
var (
	// ErrServerClosed is returned by Serve after Shutdown or Close.
	ErrServerClosed = errors.New("unary: server closed")
	// ErrNoHandlers is returned by New for a Config without Handlers.
	ErrNoHandlers = errors.New("unary: Config.Handlers is empty")
)

// Server serves unary gRPC calls over HTTP/2. It is safe for concurrent
// use.
type Server struct {
	cfg      Config
	fallback *chanListener // nil without Config.Fallback

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	closed    bool
	fbOnce    sync.Once
	work      chan *stream  // to the workers
	done      chan struct{} // closed by stop: the workers return
	workersWG sync.WaitGroup
	wg        sync.WaitGroup // connections' goroutines (each waits for its proxied calls')
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if len(cfg.Handlers) == 0 {
		return nil, ErrNoHandlers
	}
	if cfg.MaxConcurrentStreams == 0 {
		cfg.MaxConcurrentStreams = 100
	}
	if cfg.MaxRecvMsgSize <= 0 {
		cfg.MaxRecvMsgSize = 4 << 20
	}
	if cfg.MaxHeaderListSize == 0 {
		cfg.MaxHeaderListSize = 16 << 20
	}
	cfg.HandshakeTimeout = orDefault(cfg.HandshakeTimeout, 120*time.Second)
	cfg.KeepaliveTime = orDefault(cfg.KeepaliveTime, 2*time.Hour)
	cfg.KeepaliveTimeout = orDefault(cfg.KeepaliveTimeout, 20*time.Second)
	cfg.KeepaliveMinTime = orDefault(cfg.KeepaliveMinTime, 5*time.Minute)
	cfg.WriteTimeout = orDefault(cfg.WriteTimeout, 20*time.Second)
	if cfg.BaseContext == nil {
		cfg.BaseContext = context.Background()
	}
	if cfg.TLS != nil {
		cfg.TLS = cfg.TLS.Clone()
		cfg.TLS.NextProtos = []string{"h2"}
	}
	s := &Server{cfg: cfg, listeners: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{},
		work: make(chan *stream), done: make(chan struct{})}
	for range cfg.Workers {
		s.workersWG.Add(1)
		go s.worker()
	}
	if cfg.Fallback != nil {
		s.fallback = newChanListener()
	}
	return s, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Serve accepts connections on l and serves them until Shutdown or Close,
// which close l; it then returns ErrServerClosed. The first call to Serve
// starts the fallback's Serve.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	if s.fallback != nil {
		s.fbOnce.Do(func() {
			s.fallback.addr = l.Addr()
			go func() { _ = s.cfg.Fallback.Serve(s.fallback) }()
		})
	}
	var delay time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		c := newConn(s, nc)
		if !s.track(c) {
			_ = nc.Close()
			continue
		}
		go c.serve()
	}
}

// track adds c to the server's connections; false once closed.
func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return true
}

// untrack removes c, whose goroutine ends.
func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// handOff gives nc, with its bytes read so far, to the fallback; without
// one, or once closed, nc is closed.
func (s *Server) handOff(nc net.Conn) {
	if s.fallback == nil || !s.fallback.put(nc) {
		_ = nc.Close()
	}
}

// worker runs calls until the server stops.
func (s *Server) worker() {
	defer s.workersWG.Done()
	for {
		select {
		case st := <-s.work:
			st.c.run(st)
		case <-s.done:
			return
		}
	}
}

// dispatch runs a call on a worker, or on a goroutine of its own when none
// is free.
func (s *Server) dispatch(st *stream) {
	select {
	case s.work <- st:
	default:
		go st.c.run(st)
	}
}

// Shutdown stops accepting connections, sends GOAWAY to every connection
// (those still deciding whether they are served are closed), and waits
// for their calls to be answered and the connections to close, or for
// ctx's end, when it closes them all and returns ctx's error. The
// fallback's listener is closed; the fallback's own connections are its
// to drain (grpc.Server.GracefulStop).
func (s *Server) Shutdown(ctx context.Context) error {
	conns := s.stop()
	for _, c := range conns {
		c.shutdown()
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.stopWorkers()
		return nil
	case <-ctx.Done():
		for _, c := range s.stop() {
			c.close()
		}
		<-done
		s.stopWorkers()
		return ctx.Err()
	}
}

// stopWorkers ends the workers once the connections are gone.
func (s *Server) stopWorkers() {
	s.mu.Lock()
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.mu.Unlock()
	s.workersWG.Wait()
}

// Close closes the listeners and every connection at once.
func (s *Server) Close() error {
	for _, c := range s.stop() {
		c.close()
	}
	s.wg.Wait()
	s.stopWorkers()
	return nil
}

// stop marks the server closed, closes its listeners and returns its
// connections.
func (s *Server) stop() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for l := range s.listeners {
		_ = l.Close()
	}
	clear(s.listeners)
	if s.fallback != nil {
		_ = s.fallback.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

// chanListener is the fallback's listener: Accept returns the connections
// handed off.
type chanListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
	addr      net.Addr
}

func newChanListener() *chanListener {
	return &chanListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// put hands nc to Accept; false once closed.
func (l *chanListener) put(nc net.Conn) bool {
	select {
	case <-l.done:
		return false
	default:
	}
	select {
	case l.conns <- nc:
		return true
	case <-l.done:
		return false
	}
}

// Accept returns the next connection handed off.
func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case nc := <-l.conns:
		return nc, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close makes Accept return net.ErrClosed.
func (l *chanListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

// Addr is the address of the first listener served.
func (l *chanListener) Addr() net.Addr {
	if l.addr == nil {
		return &net.TCPAddr{}
	}
	return l.addr
}

// replayConn is a connection handed off: Read returns the bytes read
// before the hand-off, then the connection's.
type replayConn struct {
	net.Conn
	pending []byte
}

func (r *replayConn) Read(p []byte) (int, error) {
	if len(r.pending) > 0 {
		n := copy(p, r.pending)
		r.pending = r.pending[n:]
		return n, nil
	}
	return r.Conn.Read(p)
}

// String names the server's handlers' count, for logs.
func (s *Server) String() string { return fmt.Sprintf("unary.Server(%d methods)", len(s.cfg.Handlers)) }
