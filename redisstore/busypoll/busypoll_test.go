package busypoll_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlimit/actorlimit/internal/redistest"
	"github.com/actorlimit/actorlimit/internal/testkit"
	"github.com/actorlimit/actorlimit/redisstore/busypoll"
)

func TestNewRefusesBadConfig(t *testing.T) {
	for _, spin := range []time.Duration{0, -time.Microsecond, busypoll.MaxSpin + 1, time.Hour} {
		p, err := busypoll.New(busypoll.Config{Spin: spin})
		if !errors.Is(err, busypoll.ErrInvalid) || p != nil {
			t.Errorf("New(Spin %v) = %v, %v; want ErrInvalid", spin, p, err)
			continue
		}
		if !strings.Contains(err.Error(), "Spin "+spin.String()) {
			t.Errorf("New(Spin %v): %q does not name the spin", spin, err)
		}
	}
	for _, spin := range []time.Duration{time.Nanosecond, 100 * time.Microsecond, busypoll.MaxSpin} {
		if _, err := busypoll.New(busypoll.Config{Spin: spin}); err != nil {
			t.Errorf("New(Spin %v): %v", spin, err)
		}
	}
}

func newPoller(t *testing.T, cfg busypoll.Config) *busypoll.Poller {
	t.Helper()
	p, err := busypoll.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// values returns n values of growing sizes, up to a few hundred KiB, so
// that replies come in many segments and reads of all sizes.
func values(n int) []string {
	out := make([]string, n)
	for i := range out {
		size := 1 + (i*i*37)%(300<<10)
		out[i] = strings.Repeat(string(rune('a'+i%26)), size)
	}
	return out
}

// roundTrips sets and reads back vals on c, in lone commands and in
// pipelines, and fails t on any difference.
func roundTrips(t *testing.T, c *redis.Client, prefix string, vals []string) {
	t.Helper()
	ctx := context.Background()
	for i, v := range vals {
		k := fmt.Sprintf("%s%d", prefix, i)
		if err := c.Set(ctx, k, v, time.Minute).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		got, err := c.Get(ctx, k).Result()
		if err != nil || got != v {
			t.Fatalf("GET %s: %d bytes, %v; want %d bytes", k, len(got), err, len(v))
		}
	}
	pipe := c.Pipeline()
	cmds := make([]*redis.StringCmd, len(vals))
	for i := range vals {
		cmds[i] = pipe.Get(ctx, fmt.Sprintf("%s%d", prefix, i))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	for i, cmd := range cmds {
		if cmd.Val() != vals[i] {
			t.Fatalf("pipelined GET %d: %d bytes; want %d", i, len(cmd.Val()), len(vals[i]))
		}
	}
}

// TestRoundTripsOnAPolledConnection: a lone caller's replies, from a byte
// to hundreds of KiB, alone and pipelined, read the same through a
// Poller's connection, and most of them come while the read polls.
func TestRoundTripsOnAPolledConnection(t *testing.T) {
	srv := redistest.Start(t)
	p := newPoller(t, busypoll.Config{Spin: busypoll.MaxSpin})
	c := srv.Client(func(o *redis.Options) { o.Dialer, o.Protocol = p.Dial, 2 })
	roundTrips(t, c, "lone:", values(300))
	st := p.Stats()
	if st.Polled == 0 {
		t.Errorf("no reply came while a read polled: %+v", st)
	}
	if st.Unpolled != 0 {
		t.Errorf("a lone caller's read did not poll: %+v", st)
	}
}

// TestSubscriptionDoesNotStopPolling: a subscription's read, which has no
// deadline and waits for as long as it takes (as the one a Sentinel client
// keeps open on its sentinels, dialed by the same Dialer), does not keep a
// lone caller's reads from polling.
func TestSubscriptionDoesNotStopPolling(t *testing.T) {
	srv := redistest.Start(t)
	p := newPoller(t, busypoll.Config{Spin: busypoll.MaxSpin})
	c := srv.Client(func(o *redis.Options) { o.Dialer, o.Protocol = p.Dial, 2 })
	ctx := context.Background()
	sub := c.Subscribe(ctx, "failovers")
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	got := make(chan *redis.Message, 1)
	go func() {
		m, err := sub.ReceiveMessage(ctx) // a read in flight, with no deadline
		if err == nil {
			got <- m
		}
	}()
	roundTrips(t, c, "beside:", values(20))
	if st := p.Stats(); st.Polled == 0 {
		t.Errorf("no reply came while a read polled beside a subscription: %+v", st)
	}
	if err := c.Publish(ctx, "failovers", "switch").Err(); err != nil {
		t.Fatal(err)
	}
	if m := <-got; m.Payload != "switch" {
		t.Errorf("the subscription got %q", m.Payload)
	}
}

// TestSentinel: a Sentinel client, whose connections to the primary and
// to the sentinels (one of them subscribed to learn of failovers, a read
// in flight with no deadline) the Poller dials, gets a lone caller's
// replies polled for.
func TestSentinel(t *testing.T) {
	s := redistest.StartSentinels(t, redistest.SentinelsConfig{})
	p := newPoller(t, busypoll.Config{Spin: busypoll.MaxSpin})
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.Master, SentinelAddrs: s.Addrs,
		Dialer: p.Dial, Protocol: 2, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	roundTrips(t, c, "sentinel:", values(30))
	// A few reads overlap at the start (the client asks the sentinels
	// where the primary is, and subscribes); the lone caller's poll after.
	if st := p.Stats(); st.Polled <= st.Unpolled {
		t.Errorf("most replies did not come while a read polled: %+v", st)
	}
}

// TestOneReadPollsAtATime: 16 callers at once on one client, under -race:
// every reply is the caller's own, and reads that overlap another do not
// poll.
func TestOneReadPollsAtATime(t *testing.T) {
	srv := redistest.Start(t)
	p := newPoller(t, busypoll.Config{Spin: busypoll.MaxSpin})
	c := srv.Client(func(o *redis.Options) { o.Dialer, o.Protocol, o.PoolSize = p.Dial, 2, 16 })
	vals := values(40)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() { roundTrips(t, c, fmt.Sprintf("caller%d:", g), vals) })
	}
	wg.Wait()
	if st := p.Stats(); st.Unpolled == 0 {
		t.Errorf("16 callers at once, yet every read polled: %+v", st)
	}
}

// TestDeadlinesMidRead: 16 callers whose deadlines, from nothing to a few
// hundred µs, often pass while a read polls or waits: every reply a caller
// gets is its own (a connection whose read timed out is not used again),
// and the client keeps working after.
func TestDeadlinesMidRead(t *testing.T) {
	srv := redistest.Start(t)
	p := newPoller(t, busypoll.Config{Spin: busypoll.MaxSpin})
	c := srv.Client(func(o *redis.Options) {
		o.Dialer, o.Protocol, o.PoolSize, o.ContextTimeoutEnabled, o.MaxRetries = p.Dial, 2, 16, true, -1
	})
	ctx := context.Background()
	for g := range 16 {
		if err := c.Set(ctx, fmt.Sprint("own", g), strings.Repeat(fmt.Sprint(g), 1000+g), time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var answered, timedOut sync.Map
	for g := range 16 {
		wg.Go(func() {
			want := strings.Repeat(fmt.Sprint(g), 1000+g)
			for i := range 300 {
				cctx, cancel := context.WithTimeout(ctx, time.Duration(i%7)*50*time.Microsecond)
				got, err := c.Get(cctx, fmt.Sprint("own", g)).Result()
				cancel()
				if err != nil {
					timedOut.Store(g, true)
					continue
				}
				answered.Store(g, true)
				if got != want {
					t.Errorf("caller %d got another's reply: %d bytes", g, len(got))
					return
				}
			}
		})
	}
	wg.Wait()
	count := func(m *sync.Map) (n int) {
		m.Range(func(any, any) bool { n++; return true })
		return n
	}
	if count(&timedOut) == 0 || count(&answered) == 0 {
		t.Errorf("callers with a deadline passed: %d, answered: %d; want both", count(&timedOut), count(&answered))
	}
	roundTrips(t, c, "after:", values(20))
}

// TestTLS: the Poller's TLS client over a polled socket, to a redis-server
// that speaks TLS only, its ServerName taken from the address.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testkit.NewCA(t, dir, "redis")
	srvCert, srvKey := ca.Issue(t, "redis")
	srv := redistest.StartConfig(t, redistest.Config{
		TLS:  &tls.Config{RootCAs: pool(t, ca.File), ServerName: "127.0.0.1"},
		Args: []string{"--tls-cert-file", srvCert, "--tls-key-file", srvKey, "--tls-ca-cert-file", ca.File, "--tls-auth-clients", "no"},
	})
	p := newPoller(t, busypoll.Config{Spin: busypoll.MaxSpin, TLS: &tls.Config{RootCAs: pool(t, ca.File)}})
	c := srv.Client(func(o *redis.Options) { o.Dialer, o.Protocol, o.TLSConfig = p.Dial, 2, nil })
	roundTrips(t, c, "tls:", values(50))
	if st := p.Stats(); st.Polled == 0 {
		t.Errorf("no reply came while a read polled: %+v", st)
	}

	// A CA that did not sign the server's certificate is refused.
	other := testkit.NewCA(t, dir, "other")
	p2 := newPoller(t, busypoll.Config{Spin: time.Millisecond, TLS: &tls.Config{RootCAs: pool(t, other.File)}})
	c2 := srv.Client(func(o *redis.Options) { o.Dialer, o.MaxRetries = p2.Dial, -1 })
	var uerr x509.UnknownAuthorityError
	if err := c2.Ping(context.Background()).Err(); !errors.As(err, &uerr) {
		t.Errorf("PING with a CA that did not sign the server: %v; want an unknown authority", err)
	}
}

// pool returns a pool of the certificates in the PEM file path.
func pool(t *testing.T, path string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", path)
	}
	return p
}

// TestHungServerPausesPolling: a Redis that never answers ends each read
// at its deadline with a timeout, and after four polls that ran out of
// spin the Poller lets reads park without polling.
func TestHungServerPausesPolling(t *testing.T) {
	addr := redistest.Hung(t)
	p := newPoller(t, busypoll.Config{Spin: time.Millisecond})
	c := redis.NewClient(&redis.Options{Addr: addr, Dialer: p.Dial, Protocol: 2, MaxRetries: -1,
		ContextTimeoutEnabled: true, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	for i := range 6 {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("PING %d to a hung server: %v; want a timeout", i, err)
		}
	}
	st := p.Stats()
	if st.Waited != 4 || st.Unpolled != 2 || st.Polled != 0 {
		t.Errorf("stats %+v; want 4 polls that waited, then 2 reads unpolled", st)
	}
}

// TestPiecesAndEnd: a server that answers in pieces, pausing between
// them, then closes: the reads get every byte in order, then io.EOF.
func TestPiecesAndEnd(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	want := bytes.Repeat([]byte("0123456789"), 1000)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for i := 0; i < len(want); i += 2500 {
			_, _ = c.Write(want[i : i+2500])
			time.Sleep(2 * time.Millisecond) // pieces the reader must wait for, by polling or parked
		}
	}()
	p := newPoller(t, busypoll.Config{Spin: time.Millisecond})
	c, err := p.Dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A read polls only under a deadline (go-redis sets one for each
	// command's reply).
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, %v; want %d bytes", len(got), err, len(want))
	}
	if st := p.Stats(); st.Polled+st.Waited == 0 {
		t.Errorf("no read polled: %+v", st)
	}
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read after the end: %v; want io.EOF", err)
	}
}

// TestPollAllocatesNothing: a read that polls allocates nothing: PINGs
// written on a polled connection to a redis-server, and their PONGs read.
func TestPollAllocatesNothing(t *testing.T) {
	srv := redistest.Start(t)
	p := newPoller(t, busypoll.Config{Spin: busypoll.MaxSpin})
	c, err := p.Dial(context.Background(), "tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	ping, pong, in := []byte("*1\r\n$4\r\nPING\r\n"), []byte("+PONG\r\n"), make([]byte, 7)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := c.Write(ping); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, in); err != nil || !bytes.Equal(in, pong) {
			t.Fatalf("read %q, %v; want %q", in, err, pong)
		}
	})
	if st := p.Stats(); st.Polled == 0 {
		t.Fatalf("no read polled: %+v", st)
	}
	if allocs != 0 {
		t.Errorf("%v allocations a round trip; want 0", allocs)
	}
}

// TestClosedPooledConnectionIsFound: a pooled connection that Redis closed
// while idle is found by go-redis's check of the connections it hands out,
// which peeks at the socket under the Poller's connection, and the next
// command works with no retry.
func TestClosedPooledConnectionIsFound(t *testing.T) {
	srv := redistest.Start(t)
	p := newPoller(t, busypoll.Config{Spin: time.Millisecond})
	c := srv.Client(func(o *redis.Options) { o.Dialer, o.Protocol, o.MaxRetries, o.PoolSize = p.Dial, 2, -1, 1 })
	ctx := context.Background()
	id, err := c.ClientID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	admin := srv.Client()
	if err := admin.ClientKillByFilter(ctx, "ID", fmt.Sprint(id)).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("PING %d after Redis closed the idle connection: %v", i, err)
		}
	}
}
