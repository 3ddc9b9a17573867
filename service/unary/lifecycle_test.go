package unary_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding/gzip"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/actorlimit/actorlimit/internal/testkit"
	"github.com/actorlimit/actorlimit/service/unary"
)

// TestHandOff: a connection whose first call is a stream (health Watch)
// is grpc-go's, which then serves every call on it, the RateLimitService's
// too; on a connection whose first call is served here a Watch is proxied
// to grpc-go.
func TestHandOff(t *testing.T) {
	s := serve(t, unary.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	handed := dial(t, s.addr, nil)
	w, err := healthpb.NewHealthClient(handed).Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	first, err := w.Recv()
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, first.GetStatus())
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	next, err := w.Recv()
	require.NoError(t, err, "the stream goes on")
	assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, next.GetStatus())
	resp, err := rlsv3.NewRateLimitServiceClient(handed).ShouldRateLimit(ctx, request("d", "on grpc-go"))
	require.NoError(t, err)
	assert.Equal(t, "on grpc-go", resp.GetResponseHeadersToAdd()[0].GetValue())

	direct := dial(t, s.addr, nil)
	resp, err = rlsv3.NewRateLimitServiceClient(direct).ShouldRateLimit(ctx, request("d", "direct"))
	require.NoError(t, err)
	assert.Equal(t, "direct", resp.GetResponseHeadersToAdd()[0].GetValue())
	w2, err := healthpb.NewHealthClient(direct).Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	got, err := w2.Recv()
	require.NoError(t, err, "proxied to grpc-go (TestProxy)")
	assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, got.GetStatus())
}

// TestShutdownDrains: Shutdown with calls in flight sends GOAWAY, lets
// them be answered, refuses none of them, and returns once they are; a
// Shutdown whose context ends first closes the connections.
func TestShutdownDrains(t *testing.T) {
	for _, tc := range []struct {
		name    string
		release bool // the calls end before the context
	}{
		{"calls answered", true},
		{"context ends first", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t, unary.Config{})
			cc := dial(t, s.addr, nil)
			client := rlsv3.NewRateLimitServiceClient(cc)
			_, err := client.ShouldRateLimit(t.Context(), request("d", "warm"))
			require.NoError(t, err)
			// "sleep" calls end with their context: give them a deadline
			// past the Shutdown, so that they are in flight through it.
			const calls = 8
			var wg sync.WaitGroup
			codesSeen := make(chan codes.Code, calls)
			for range calls {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
					defer cancel()
					_, err := client.ShouldRateLimit(ctx, request("sleep", "v"))
					codesSeen <- status.Code(err)
				})
			}
			time.Sleep(50 * time.Millisecond) // the calls reach the server
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			if !tc.release {
				ctx, cancel = context.WithTimeout(t.Context(), 100*time.Millisecond)
			}
			defer cancel()
			start := time.Now()
			err = s.srv.Shutdown(ctx)
			wg.Wait()
			close(codesSeen)
			if tc.release {
				assert.NoError(t, err)
				assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "waited for the calls")
				for c := range codesSeen {
					assert.Equal(t, codes.DeadlineExceeded, c, "ended by their own deadline, not refused")
				}
			} else {
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				for c := range codesSeen {
					assert.Contains(t, []codes.Code{codes.Unavailable, codes.DeadlineExceeded}, c)
				}
			}
		})
	}
}

// TestTLS: over TLS, with and without a required client certificate, a
// connection whose first call is served here and one handed to grpc-go
// (a Watch first) both work; a client without the certificate asked for,
// or without ALPN h2, is refused at the handshake.
func TestTLS(t *testing.T) {
	ca := testkit.NewCA(t, t.TempDir(), "ca")
	serverCert, serverKey := ca.Issue(t, "server")
	clientCert, clientKey := ca.Issue(t, "client")
	caPEM, err := os.ReadFile(ca.File)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	load := func(cert, key string) tls.Certificate {
		kp, err := tls.LoadX509KeyPair(cert, key)
		require.NoError(t, err)
		return kp
	}
	for _, tc := range []struct {
		name          string
		requireClient bool
		clientCert    bool
		served        bool
	}{
		{"server certificate only", false, false, true},
		{"client certificate required and given", true, true, true},
		{"client certificate required, none given", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := &tls.Config{Certificates: []tls.Certificate{load(serverCert, serverKey)}, MinVersion: tls.VersionTLS12}
			if tc.requireClient {
				conf.ClientCAs, conf.ClientAuth = pool, tls.RequireAndVerifyClientCert
			}
			s := serve(t, unary.Config{TLS: conf})
			cconf := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
			if tc.clientCert {
				cconf.Certificates = []tls.Certificate{load(clientCert, clientKey)}
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			direct := dial(t, s.addr, credentials.NewTLS(cconf))
			resp, err := rlsv3.NewRateLimitServiceClient(direct).ShouldRateLimit(ctx, request("d", "tls"))
			if !tc.served {
				assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "tls", resp.GetResponseHeadersToAdd()[0].GetValue())
			handed := dial(t, s.addr, credentials.NewTLS(cconf))
			w, err := healthpb.NewHealthClient(handed).Watch(ctx, &healthpb.HealthCheckRequest{})
			require.NoError(t, err)
			first, err := w.Recv()
			require.NoError(t, err, "a Watch over TLS, handed to grpc-go")
			assert.Equal(t, healthpb.HealthCheckResponse_SERVING, first.GetStatus())

			// Without ALPN h2 the handshake is refused.
			nc, err := tls.Dial("tcp", s.addr, &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}, Certificates: cconf.Certificates, MinVersion: tls.VersionTLS12})
			if err == nil {
				_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, err = nc.Read(make([]byte, 1))
				nc.Close()
			}
			assert.Error(t, err, "a TLS client without h2")
		})
	}
}

// TestConnectionTimers: a quiet connection is pinged and closed when the
// ping goes unanswered, kept when answered; a connection past
// MaxConnectionAge gets GOAWAY, then is closed after the grace.
func TestConnectionTimers(t *testing.T) {
	tests := []struct {
		name    string
		cfg     unary.Config
		ackPing bool
		want    string // what the client sees first: "GOAWAY", "closed", or "open" after 500 ms
	}{
		{"ping unanswered", unary.Config{KeepaliveTime: 50 * time.Millisecond, KeepaliveTimeout: 50 * time.Millisecond}, false, "closed"},
		{"ping answered", unary.Config{KeepaliveTime: 50 * time.Millisecond, KeepaliveTimeout: 50 * time.Millisecond}, true, "open"},
		{"max connection age", unary.Config{MaxConnectionAge: 50 * time.Millisecond, MaxConnectionAgeGrace: 50 * time.Millisecond}, true, "GOAWAY"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t, tc.cfg)
			r := dialRaw(t, s.addr)
			r.call(1, rlsMethod, echoMsg("d", "v"))
			assert.Equal(t, "200 0", first(r.answer(1)))
			got := "open"
			deadline := time.Now().Add(500 * time.Millisecond)
			for got == "open" {
				_ = r.nc.SetReadDeadline(deadline)
				f, err := r.fr.ReadFrame()
				var ne net.Error
				switch {
				case errors.As(err, &ne) && ne.Timeout():
					goto done
				case err != nil:
					got = "closed"
				default:
					switch f := f.(type) {
					case *http2.GoAwayFrame:
						got = "GOAWAY"
					case *http2.PingFrame:
						if !f.IsAck() && tc.ackPing {
							require.NoError(t, r.fr.WritePing(true, f.Data))
						}
					}
				}
			}
		done:
			assert.Equal(t, tc.want, got)
			if got == "GOAWAY" { // then closed after the grace
				_ = r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
				for {
					if _, err := r.fr.ReadFrame(); err != nil {
						var ne net.Error
						assert.False(t, errors.As(err, &ne) && ne.Timeout(), "closed after the grace")
						break
					}
				}
			}
		})
	}
}

// TestCompressedFirstCall: a connection whose first call is compressed
// goes to grpc-go, which has gzip (registered by this test's imports);
// a compressed call on a connection served here is proxied to grpc-go
// (TestProxy); one of an encoding nobody has is UNIMPLEMENTED, as grpc-go
// answers it.
func TestCompressedFirstCall(t *testing.T) {
	s := serve(t, unary.Config{})
	gz := grpc.UseCompressor(gzip.Name)
	handed := rlsv3.NewRateLimitServiceClient(dial(t, s.addr, nil))
	resp, err := handed.ShouldRateLimit(t.Context(), request("d", "gz"), gz)
	require.NoError(t, err, "grpc-go decompresses it")
	assert.Equal(t, "gz", resp.GetResponseHeadersToAdd()[0].GetValue())

	direct := rlsv3.NewRateLimitServiceClient(dial(t, s.addr, nil))
	_, err = direct.ShouldRateLimit(t.Context(), request("d", "plain"))
	require.NoError(t, err)
	resp, err = direct.ShouldRateLimit(t.Context(), request("d", "gz direct"), gz)
	require.NoError(t, err, "proxied to grpc-go, which decompresses it")
	assert.Equal(t, "gz direct", resp.GetResponseHeadersToAdd()[0].GetValue())
}

// TestEarlyFrames: a PING, a second SETTINGS and a WINDOW_UPDATE sent
// before the first call are answered whichever server takes the
// connection: the direct transport once it decides, grpc-go from the
// bytes replayed.
func TestEarlyFrames(t *testing.T) {
	for _, tc := range []struct {
		name, path string
	}{
		{"served here", rlsMethod},
		{"handed to grpc-go", "/grpc.health.v1.Health/Watch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t, unary.Config{})
			r := dialRaw(t, s.addr)
			require.NoError(t, r.fr.WritePing(false, [8]byte{'e', 'a', 'r', 'l', 'y'}))
			require.NoError(t, r.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}))
			require.NoError(t, r.fr.WriteWindowUpdate(0, 1<<20))
			msg := echoMsg("d", "v")
			if tc.path != rlsMethod {
				msg, _ = proto.Marshal(&healthpb.HealthCheckRequest{})
			}
			r.call(1, tc.path, msg)
			var pingAcked bool
			acks, data := 0, false
			for !(pingAcked && acks >= 2 && data) {
				switch f := r.read().(type) {
				case *http2.PingFrame:
					pingAcked = pingAcked || (f.IsAck() && f.Data == [8]byte{'e', 'a', 'r', 'l', 'y'})
				case *http2.SettingsFrame:
					if f.IsAck() {
						acks++
					}
				case *http2.DataFrame:
					data = data || f.StreamID == 1
				case *http2.GoAwayFrame:
					t.Fatalf("GOAWAY %v", f.ErrCode)
				}
			}
		})
	}
}
