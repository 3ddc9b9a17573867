// Package busypoll dials connections for go-redis (Options.Dialer,
// FailoverOptions.Dialer, ClusterOptions.Dialer) whose reads wait for a
// reply by polling the socket for a short while before they park.
//
// A go-redis round trip writes its command and reads the reply. When the
// reply is not there yet the read parks its goroutine; the Go runtime,
// finding nothing else to run, puts its thread to sleep in epoll_wait, and
// the reply then has to wake it. On a virtual machine waking an idle vCPU
// costs tens of microseconds: a lone caller's round trip to a local Redis
// took about 60µs parked and 25µs polled on a 2-vCPU VM (p50), for less
// client CPU a round trip (18-21µs against 31-35). A [Poller]'s
// connections, when a read finds no data, read again without blocking,
// yielding the processor between tries, until the reply comes or
// [Config].Spin has passed; then they park as any read does.
//
// Polling burns a processor while it waits, so it is kept to where it
// pays:
//   - one read at a time polls: a read that starts while another read of
//     the Poller's connections is in flight (several callers at once, whose
//     round trips overlap) parks at once;
//   - after four polls in a row that ran out of spin (a Redis farther away
//     than the spin, or a slow command), the Poller stops polling for the
//     next 256 reads, then tries again;
//   - a poll ends at the connection's read deadline, as a parked read does;
//   - a read without a deadline (a subscription's, such as the one a
//     Sentinel client keeps open to learn of failovers) does not poll, and
//     does not keep the others from polling: go-redis gives every command's
//     read a deadline (ReadTimeout, or the context's with
//     ContextTimeoutEnabled), unless ReadTimeout is -1.
//
// While a read polls, its goroutine keeps its processor as a goroutine that
// computes does: the Go runtime may then notice that another socket of the
// process is ready up to a spin late (when no idle thread is waiting on the
// network, which the runtime does not ensure). Keep the spin short.
//
// It is worth it for a process whose round trips to Redis rarely overlap
// (a lone caller, a service at low load) on a machine where waking is dear;
// with many callers the reads overlap and park as before. The connections
// are go-redis's as they would dial them (TCP or a Unix socket, TLS when a
// config is given, keep-alives as go-redis sets them); reads and errors are
// the socket's. On systems other than Linux nothing is polled.
package busypoll

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// MaxSpin is the longest spin [New] accepts.
const MaxSpin = 10 * time.Millisecond

// ErrInvalid is wrapped by the errors of [New] for a bad argument.
var ErrInvalid = errors.New("busypoll: invalid argument")

// The Poller's pacing: after missesToPause polls in a row ran out of spin
// it lets pause reads park before polling again.
const (
	missesToPause = 4
	pause         = 256
)

// Poller dials connections whose reads poll (see the package doc) and
// counts what they did. Its methods are safe for concurrent use.
type Poller struct {
	spin   time.Duration
	tls    *tls.Config
	dialer net.Dialer

	reading atomic.Int32 // reads in flight on the Poller's connections
	misses  atomic.Int32 // polls in a row that ran out of spin
	skip    atomic.Int32 // reads left to park before polling again

	polled, waited, unpolled atomic.Uint64
}

// Stats counts the reads of a [Poller]'s connections under a deadline (see
// the package doc) by what they did; a read that could poll but found its
// data at once is in none of them.
type Stats struct {
	// Polled is the number of reads whose data came while they polled.
	Polled uint64
	// Waited is the number of polls that ran out of spin, or met the read
	// deadline, and then parked.
	Waited uint64
	// Unpolled is the number of reads that did not poll (and parked if
	// their data was not there): another read was in flight, or the Poller
	// had paused after polls that ran out of spin.
	Unpolled uint64
}

// Config is what [New] makes a Poller with.
type Config struct {
	// Spin is how long a read polls at most: 0 < Spin <= [MaxSpin]. About
	// twice a round trip to Redis when neither side sleeps, 50-200µs
	// on one machine or one rack, is a good start.
	Spin time.Duration
	// TLS, when set, makes each connection a TLS client over the polled
	// socket, as go-redis makes one with Options.TLSConfig. A config
	// without a ServerName (and without InsecureSkipVerify) gets the
	// dialed address's host as its ServerName, as tls.Dial does.
	TLS *tls.Config
	// DialTimeout bounds a dial and its TLS handshake, as go-redis's
	// Options.DialTimeout does (0: 5s, go-redis's default; negative: no
	// bound but the dial's context).
	DialTimeout time.Duration
}

// New returns a Poller whose connections' reads poll for at most
// cfg.Spin, or an error wrapping [ErrInvalid] for a bad Config.
func New(cfg Config) (*Poller, error) {
	if cfg.Spin <= 0 || cfg.Spin > MaxSpin {
		return nil, fmt.Errorf("%w: Spin %v is not in (0, %v]", ErrInvalid, cfg.Spin, MaxSpin)
	}
	timeout := cfg.DialTimeout
	switch {
	case timeout == 0:
		timeout = 5 * time.Second
	case timeout < 0:
		timeout = 0
	}
	return &Poller{spin: cfg.Spin, tls: cfg.TLS, dialer: net.Dialer{
		Timeout: timeout,
		// go-redis's own dialer's keep-alives (NewDialer).
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3},
	}}, nil
}

// Dial dials addr on network ("tcp" or "unix") as go-redis does, bounded
// by ctx, and returns a connection whose reads poll. It has the signature
// of go-redis's Options.Dialer.
func (p *Poller) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if p.dialer.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.dialer.Timeout)
		defer cancel()
	}
	c, err := p.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	pc := &conn{Conn: c, p: p}
	pc.tries = pc.try
	if sc, ok := c.(syscall.Conn); ok {
		if pc.raw, err = sc.SyscallConn(); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	if p.tls == nil {
		return pc, nil
	}
	cfg := p.tls
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	tc := tls.Client(pc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return tc, nil
}

// Stats returns the Poller's counters.
func (p *Poller) Stats() Stats {
	return Stats{Polled: p.polled.Load(), Waited: p.waited.Load(), Unpolled: p.unpolled.Load()}
}

// conn is a dialed connection whose reads poll. raw is nil for a
// connection that offers no file descriptor: its reads park.
type conn struct {
	net.Conn
	raw      syscall.RawConn
	p        *Poller
	deadline atomic.Int64 // the read deadline, Unix ns; 0: none

	// A poll's arguments and results (see poll), touched only by the read
	// that holds the socket: go-redis reads a connection from one
	// goroutine at a time.
	tries      func(fd uintptr) bool // c.try
	buf        []byte
	end        time.Time
	n          int
	got, tried bool
}

// Read reads as the socket does, polling first when no other read of the
// Poller's is in flight and it is not paused.
func (c *conn) Read(b []byte) (int, error) {
	p := c.p
	if c.raw == nil || len(b) == 0 || c.deadline.Load() == 0 {
		// No deadline: a subscription's read, which waits as long as it
		// takes, neither polls nor keeps others from polling.
		return c.Conn.Read(b)
	}
	defer p.reading.Add(-1)
	if p.reading.Add(1) != 1 || p.paused() {
		return c.read(b)
	}
	end := time.Now().Add(p.spin)
	if d := c.deadline.Load(); d != 0 && d < end.UnixNano() {
		end = time.Unix(0, d)
	}
	n, got, tried := c.poll(b, end)
	switch {
	case got:
		p.misses.Store(0)
		if tried {
			p.polled.Add(1)
		}
		return n, nil
	case !tried:
		// An error or the end of the stream (which the socket's own read
		// reports, as it would have), or nothing polled at all.
		return c.Conn.Read(b)
	}
	p.waited.Add(1)
	if p.misses.Add(1) >= missesToPause {
		p.misses.Store(0)
		p.skip.Store(pause)
	}
	return c.Conn.Read(b)
}

// read is the socket's read, counted as one that did not poll.
func (c *conn) read(b []byte) (int, error) {
	c.p.unpolled.Add(1)
	return c.Conn.Read(b)
}

// paused reports whether the Poller is letting reads park after polls that
// ran out of spin, and counts this read against the pause.
func (p *Poller) paused() bool {
	if p.skip.Load() <= 0 {
		return false
	}
	return p.skip.Add(-1) >= 0
}

// SetDeadline sets the connection's deadlines, which a poll keeps too.
func (c *conn) SetDeadline(t time.Time) error {
	c.keep(t)
	return c.Conn.SetDeadline(t)
}

// SetReadDeadline sets the connection's read deadline, which a poll keeps
// too.
func (c *conn) SetReadDeadline(t time.Time) error {
	c.keep(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *conn) keep(t time.Time) {
	if t.IsZero() {
		c.deadline.Store(0)
		return
	}
	c.deadline.Store(t.UnixNano())
}

// SyscallConn returns the socket's raw connection, as the dialed
// connection's, so that go-redis's health check of a pooled connection
// peeks at it.
func (c *conn) SyscallConn() (syscall.RawConn, error) {
	if c.raw == nil {
		return nil, errors.New("busypoll: the connection has no file descriptor")
	}
	return c.raw, nil
}

// NetConn returns the dialed connection.
func (c *conn) NetConn() net.Conn { return c.Conn }
