package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// rawCodec sends and receives a message's wire bytes as they are: a
// client that sends what no RateLimitRequest it could build would.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

const shouldRateLimit = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// memoryKB returns a field of /proc/PID/status (VmRSS, VmHWM), in KiB.
func memoryKB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestFloodOfEmptyDescriptors: 16 clients sending 3 requests each of 2 MB
// of empty descriptors, each on its own connection, are refused with
// InvalidArgument naming the bound, the process stays under 400 MiB
// resident at its peak, and a legitimate client is answered without error
// all along.
func TestFloodOfEmptyDescriptors(t *testing.T) { forTransports(t, testFloodOfEmptyDescriptors) }

func testFloodOfEmptyDescriptors(t *testing.T, transport string) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc")
	}
	const maxPeakKB = 400 << 10
	d := startWithConfig(t, serveConfig, "-grpc-transport", transport)
	pid := d.cmd.Process.Pid
	flood := bytes.Repeat([]byte{0x12, 0x00}, 1<<20) // 2 MiB: a million empty descriptors
	flood = append([]byte{0x0a, 0x03, 'w', 'e', 'b'}, flood...)

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	flooding, flooded := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var refused, other atomic.Int64
	var otherErr atomic.Value
	for range 16 {
		conn, err := grpc.NewClient(d.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})))
		require.NoError(t, err)
		defer conn.Close()
		wg.Go(func() {
			for range 3 {
				var out []byte
				err := conn.Invoke(ctx, shouldRateLimit, &flood, &out)
				switch {
				case status.Code(err) == codes.InvalidArgument && strings.Contains(err.Error(), "1048576 descriptors, over the bound of 64"):
					refused.Add(1)
				default:
					other.Add(1)
					otherErr.Store(fmt.Sprint(err))
				}
			}
		})
	}
	go func() {
		wg.Wait()
		flooded()
	}()
	answered := 0
	peak := 0
	for flooding.Err() == nil {
		rctx, rcancel := context.WithTimeout(t.Context(), 2*time.Second)
		resp, err := d.client().ShouldRateLimit(rctx, request("web", desc("open", "x")))
		rcancel()
		require.NoError(t, err, "the legitimate client during the flood")
		require.Equal(t, rlsv3.RateLimitResponse_OK, resp.OverallCode)
		answered++
		peak = max(peak, memoryKB(t, pid, "VmRSS"))
		require.Less(t, peak, maxPeakKB, "resident KiB during the flood")
		time.Sleep(20 * time.Millisecond) // a client's pace, not a wait for a window
	}
	require.NoError(t, ctx.Err(), "the flood did not end within 60 s")
	hwm := memoryKB(t, pid, "VmHWM")
	t.Logf("flood: %d refused, %d other; legitimate: %d answered; peak resident %d KiB (VmHWM)", refused.Load(), other.Load(), answered, hwm)
	assert.Less(t, hwm, maxPeakKB, "VmHWM KiB")
	assert.Positive(t, refused.Load(), "flooding requests refused")
	assert.Zero(t, other.Load(), "flooding requests answered otherwise: %v", otherErr.Load())
	assert.Positive(t, answered)
}

// TestClientCertificates: with -tls-client-ca, a client without a
// certificate, or with one another CA signed, is refused on the gRPC and
// HTTP listeners, and one with a certificate the CA signed is served. The
// clients trust the server's certificate, so only the server's check can
// refuse them.
func TestClientCertificates(t *testing.T) { forTransports(t, testClientCertificates) }

func testClientCertificates(t *testing.T, transport string) {
	c := newCerts(t)
	other := newCerts(t)
	serverCert, serverKey := c.issue(t, "server", 2)
	goodCert, goodKey := c.issue(t, "client", 3)
	badCert, badKey := other.issue(t, "intruder", 4)
	d := startWithConfig(t, serveConfig, "-tls-cert", serverCert, "-tls-key", serverKey, "-tls-client-ca", c.caFile, "-grpc-transport", transport)

	load := func(cert, key string) []tls.Certificate {
		if cert == "" {
			return nil
		}
		kp, err := tls.LoadX509KeyPair(cert, key)
		require.NoError(t, err)
		return []tls.Certificate{kp}
	}
	for _, tc := range []struct {
		name      string
		cert, key string
		served    bool
	}{
		{"no certificate", "", "", false},
		{"another CA's", badCert, badKey, false},
		{"the CA's", goodCert, goodKey, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := &tls.Config{RootCAs: c.pool, Certificates: load(tc.cert, tc.key), MinVersion: tls.VersionTLS12}
			conn, err := grpc.NewClient(d.grpc, grpc.WithTransportCredentials(credentials.NewTLS(conf)))
			require.NoError(t, err)
			defer conn.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err = rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, request("web", desc("open", "x")))
			if tc.served {
				require.NoError(t, err, "gRPC")
				// A stream on the same connection: with -grpc-transport
				// direct, proxied to grpc-go (in process, no TLS there).
				w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
				require.NoError(t, err)
				got, err := w.Recv()
				require.NoError(t, err, "a Watch after a call")
				assert.Equal(t, healthpb.HealthCheckResponse_SERVING, got.GetStatus())
				// A connection whose first call is a stream: handed to
				// grpc-go after the TLS handshake.
				first, err := grpc.NewClient(d.grpc, grpc.WithTransportCredentials(credentials.NewTLS(conf)))
				require.NoError(t, err)
				defer first.Close()
				w, err = healthpb.NewHealthClient(first).Watch(ctx, &healthpb.HealthCheckRequest{})
				require.NoError(t, err)
				_, err = w.Recv()
				require.NoError(t, err, "a Watch first")
			} else {
				require.Error(t, err, "gRPC")
				assert.Equal(t, codes.Unavailable, status.Code(err), "gRPC: %v", err)
			}
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}, Timeout: 10 * time.Second}
			defer hc.CloseIdleConnections()
			r, err := hc.Get("https://" + d.http + "/healthcheck")
			if tc.served {
				require.NoError(t, err, "HTTP")
				r.Body.Close()
				assert.Equal(t, http.StatusOK, r.StatusCode)
			} else {
				if err == nil {
					r.Body.Close()
				}
				require.Error(t, err, "HTTP")
			}
		})
	}
}

// TestDebugListener: /rlconfig, /metrics and Go's profiles are on
// -debug-addr, not on the port of /json; an empty -debug-addr serves them
// nowhere.
func TestDebugListener(t *testing.T) {
	d := startWithConfig(t, serveConfig)
	for _, path := range []string{"/rlconfig", "/metrics", "/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/profile?seconds=1"} {
		code, _ := d.get(path)
		assert.Equal(t, http.StatusNotFound, code, "%s on the /json port", path)
		code, body := d.getDebug(path)
		assert.Equal(t, http.StatusOK, code, "%s on the debug port", path)
		assert.NotEmpty(t, body)
	}
	code, _ := d.get("/healthcheck")
	assert.Equal(t, http.StatusOK, code)
	none := startWithConfig(t, serveConfig, "-debug-addr", "")
	assert.Empty(t, none.debug, "no debug listener")
	code, _ = none.get("/metrics")
	assert.Equal(t, http.StatusNotFound, code)
}

// TestJSONSlowBody: a POST /json that sends 1 byte of a 1 000-byte body
// is cut off by -http-read-timeout.
func TestJSONSlowBody(t *testing.T) {
	d := startWithConfig(t, serveConfig, "-http-read-timeout", "300ms")
	conn, err := net.Dial("tcp", d.http)
	require.NoError(t, err)
	defer conn.Close()
	start := time.Now()
	_, err = io.WriteString(conn, "POST /json HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = io.Copy(io.Discard, conn) // until the server closes the connection
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the connection was still open after 5 s")
	assert.Less(t, time.Since(start), 3*time.Second)
}

// TestJSONBodyBound: a POST /json body over -max-request-bytes is refused
// with 413 because of its size alone: the same request padded with
// whitespace to just under the bound is answered.
func TestJSONBodyBound(t *testing.T) {
	const bound = 4096
	d := startWithConfig(t, serveConfig, "-max-request-bytes", strconv.Itoa(bound))
	req := `{"domain":"web","descriptors":[{"entries":[{"key":"open","value":"x"}]}]}`
	pad := func(n int) string { return req + strings.Repeat(" ", n-len(req)) }
	code, body := d.post(pad(bound))
	assert.Equal(t, http.StatusOK, code, body)
	code, body = d.post(pad(bound + 1))
	assert.Equal(t, http.StatusRequestEntityTooLarge, code, body)
	assert.Contains(t, body, "the body is over 4096 bytes")
	// Without a Content-Length, the bound holds as the body is read.
	resp, err := http.Post("http://"+d.http+"/json", "application/json", bufio.NewReader(strings.NewReader(pad(bound+1))))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, string(b))
}

// TestEdgeFlags: the renamed -max-entries still works, with a warning;
// -tls-client-ca needs the server's own certificate.
func TestEdgeFlags(t *testing.T) {
	f, err := parseFlags([]string{"-config", "x", "-max-entries", "5"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 5, f.bounds.Entries)
	require.Len(t, f.listen.deprecatedInUse, 1)
	assert.Contains(t, f.listen.deprecatedInUse[0], "-max-descriptor-entries")
	f, err = parseFlags([]string{"-config", "x", "-max-descriptor-entries", "7", "-max-table-entries", "100"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 7, f.bounds.Entries)
	assert.Empty(t, f.listen.deprecatedInUse)
	assert.Equal(t, 100, f.cluster.maxEntries)
	assert.Equal(t, defaultDebugAddr, f.listen.debugAddr)
	assert.Equal(t, 8*runtime.GOMAXPROCS(0), f.listen.streamWorkers)
	for args, msg := range map[string]string{
		"-tls-client-ca ca.pem":     "-tls-client-ca needs -tls-cert",
		"-max-request-bytes 10":     "-max-request-bytes 10",
		"-max-in-flight 0":          "-max-in-flight 0",
		"-http-read-timeout 0s":     "must be positive",
		"-max-table-entries 0":      "-max-table-entries 0",
		"-max-concurrent-streams 0": "-max-concurrent-streams 0",
		"-grpc-stream-workers -1":   "-grpc-stream-workers -1",
	} {
		_, err := parseFlags(append([]string{"-config", "x"}, strings.Fields(args)...), io.Discard)
		assert.ErrorContains(t, err, msg, args)
	}
}

// TestInFlight: past -max-in-flight, a request waits for a slot until its
// deadline, then is answered RESOURCE_EXHAUSTED naming the flag (HTTP 503
// on /json); a slot released lets the next one in. The health service is
// not bounded.
func TestInFlight(t *testing.T) {
	l := &inFlight{slots: make(chan struct{}, 2)}
	require.NoError(t, l.acquire(t.Context()))
	require.NoError(t, l.acquire(t.Context()))
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	err := l.acquire(ctx)
	cancel()
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	assert.ErrorContains(t, err, "2 requests in flight, the bound of -max-in-flight")

	handled := false
	handler := func(context.Context, any) (any, error) { handled = true; return nil, nil }
	ctx, cancel = context.WithTimeout(t.Context(), 50*time.Millisecond)
	_, err = l.intercept(ctx, &rlsv3.RateLimitRequest{}, nil, handler)
	cancel()
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	assert.False(t, handled)
	_, err = l.intercept(t.Context(), &healthpb.HealthCheckRequest{}, nil, handler)
	require.NoError(t, err)
	assert.True(t, handled, "the health service is not bounded")

	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/json", strings.NewReader("{}"))
	ctx, cancel = context.WithTimeout(t.Context(), 50*time.Millisecond)
	l.wrap(http.NotFoundHandler(), 10).ServeHTTP(rec, req.WithContext(ctx))
	cancel()
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)

	released := make(chan error, 1)
	go func() { released <- l.acquire(t.Context()) }()
	l.release()
	require.NoError(t, <-released, "a released slot lets a waiting request in")
}
