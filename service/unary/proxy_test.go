package unary_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding/gzip"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/actorlimit/actorlimit/service/unary"
)

// chatMethod is a stream both ways of the fallback's chat service.
const chatMethod = "/unarytest.Chat/Chat"

// chat echoes every message it reads. Its headers and trailers echo the
// metadata whose names start with x-echo. A message "wait" is answered
// "waiting", then the handler waits for its context's end; "fail" ends
// the call with FailedPrecondition, details and trailers. Each handler's
// end is sent to ended.
type chat struct {
	ended chan error
}

func (c *chat) register(gs *grpc.Server) {
	gs.RegisterService(&grpc.ServiceDesc{
		ServiceName: "unarytest.Chat",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "Chat", ClientStreams: true, ServerStreams: true,
			Handler: func(_ any, ss grpc.ServerStream) error {
				err := c.serve(ss)
				c.ended <- err
				return err
			}}},
	}, nil)
}

func (c *chat) serve(ss grpc.ServerStream) error {
	ctx := ss.Context()
	in, _ := metadata.FromIncomingContext(ctx)
	echoed := metadata.MD{}
	for k, v := range in {
		if len(k) >= 6 && k[:6] == "x-echo" {
			echoed[k] = v
		}
	}
	if len(echoed) > 0 {
		if err := ss.SetHeader(echoed); err != nil {
			return err
		}
		ss.SetTrailer(metadata.Join(echoed, metadata.Pairs("x-trailer", "t")))
	}
	for {
		m := new(wrapperspb.BytesValue)
		if err := ss.RecvMsg(m); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		switch string(m.GetValue()) {
		case "wait":
			if err := ss.SendMsg(wrapperspb.Bytes([]byte("waiting"))); err != nil {
				return err
			}
			<-ctx.Done()
			return ctx.Err()
		case "fail":
			ss.SetTrailer(metadata.Pairs("x-trailer", "failed", "x-trailer-bin", "\x00\xff"))
			st, err := status.New(codes.FailedPrecondition, "failed on purpose: 100% ü").WithDetails(wrapperspb.String("the detail"))
			if err != nil {
				return err
			}
			return st.Err()
		}
		if err := ss.SendMsg(m); err != nil {
			return err
		}
	}
}

// chatStream opens a chat stream on cc.
func chatStream(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, chatMethod, opts...)
}

// exchange sends msgs on a chat stream while it reads their echoes, and
// checks each.
func exchange(ctx context.Context, cc *grpc.ClientConn, msgs [][]byte, opts ...grpc.CallOption) error {
	cs, err := chatStream(ctx, cc, opts...)
	if err != nil {
		return err
	}
	sent := make(chan error, 1)
	go func() {
		for _, m := range msgs {
			if err := cs.SendMsg(wrapperspb.Bytes(m)); err != nil {
				sent <- err
				return
			}
		}
		sent <- cs.CloseSend()
	}()
	for i, want := range msgs {
		got := new(wrapperspb.BytesValue)
		if err := cs.RecvMsg(got); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if !bytes.Equal(got.GetValue(), want) {
			return fmt.Errorf("message %d: %d bytes back, %d sent, or not the same", i, len(got.GetValue()), len(want))
		}
	}
	if err := cs.RecvMsg(new(wrapperspb.BytesValue)); !errors.Is(err, io.EOF) {
		return fmt.Errorf("after the messages: %w, want io.EOF", err)
	}
	return <-sent
}

// bigMessages are n messages of sizes past the 64 KiB windows, and small
// and empty ones among them, their bytes random.
func bigMessages(r *rand.Rand, n int) [][]byte {
	sizes := []int{1, 100 << 10, 300 << 10, 0, 70 << 10, 17}
	msgs := make([][]byte, n)
	for i := range msgs {
		m := make([]byte, sizes[i%len(sizes)])
		for j := range m {
			m[j] = byte(r.Uint32())
		}
		msgs[i] = m
	}
	return msgs
}

// TestProxy: on a connection whose first call is served here, calls of
// methods the fallback serves are proxied to it as streams both ways:
// a health Watch, a chat of large messages, cancelled and expired calls,
// errors with details and trailers, metadata both ways, a message past
// the bound; unary calls on the same connection meanwhile are answered,
// each its own answer; every goroutine of a proxied call ends with it.
func TestProxy(t *testing.T) {
	base := runtime.NumGoroutine()
	ch := &chat{ended: make(chan error, 256)}
	s := serve(t, unary.Config{MaxRecvMsgSize: 1 << 20}, ch.register)
	cc := dial(t, s.addr, nil)
	rls := rlsv3.NewRateLimitServiceClient(cc)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := rls.ShouldRateLimit(ctx, request("d", "first"))
	require.NoError(t, err, "the first call, served here")
	require.Equal(t, "first", resp.GetResponseHeadersToAdd()[0].GetValue())
	require.NoError(t, exchange(ctx, cc, [][]byte{[]byte("warm")}), "a first proxied call: the fallback's client made")
	require.NoError(t, <-ch.ended)
	warm := steady()

	// handlerEnded waits for the chat handler's end and returns its error.
	handlerEnded := func(t *testing.T) error {
		t.Helper()
		select {
		case err := <-ch.ended:
			return err
		case <-time.After(5 * time.Second):
			t.Fatal("the fallback's handler did not end")
			return nil
		}
	}

	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"health Watch", func(t *testing.T) {
			wctx, wcancel := context.WithCancel(ctx)
			defer wcancel()
			w, err := healthpb.NewHealthClient(cc).Watch(wctx, &healthpb.HealthCheckRequest{})
			require.NoError(t, err)
			for _, want := range []healthpb.HealthCheckResponse_ServingStatus{
				healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING, healthpb.HealthCheckResponse_SERVING,
			} {
				got, err := w.Recv()
				require.NoError(t, err)
				assert.Equal(t, want, got.GetStatus())
				s.health.SetServingStatus("", 1+want%2) // SERVING <-> NOT_SERVING
			}
			wcancel()
			wctx, wcancel = context.WithCancel(ctx)
			w, err = healthpb.NewHealthClient(cc).Watch(wctx, &healthpb.HealthCheckRequest{})
			require.NoError(t, err)
			_, err = w.Recv()
			require.NoError(t, err)
			wcancel()
			_, err = w.Recv()
			assert.Equal(t, codes.Canceled, status.Code(err))
		}},
		{"large messages both ways", func(t *testing.T) {
			require.NoError(t, exchange(ctx, cc, bigMessages(rand.New(rand.NewPCG(1, 2)), 30)))
			assert.NoError(t, handlerEnded(t))
		}},
		{"gzip both ways: decompressed for the fallback", func(t *testing.T) {
			require.NoError(t, exchange(ctx, cc, bigMessages(rand.New(rand.NewPCG(3, 4)), 12), grpc.UseCompressor(gzip.Name)))
			assert.NoError(t, handlerEnded(t))
			resp, err := rls.ShouldRateLimit(ctx, request("d", "gz"), grpc.UseCompressor(gzip.Name))
			require.NoError(t, err, "a served method, compressed: proxied")
			assert.Equal(t, "gz", resp.GetResponseHeadersToAdd()[0].GetValue())
		}},
		{"gzip past MaxRecvMsgSize once decompressed, after an answer", func(t *testing.T) {
			cs, err := chatStream(ctx, cc, grpc.UseCompressor(gzip.Name))
			require.NoError(t, err)
			require.NoError(t, cs.SendMsg(wrapperspb.Bytes([]byte("first"))))
			require.NoError(t, cs.RecvMsg(new(wrapperspb.BytesValue)))
			require.NoError(t, cs.SendMsg(wrapperspb.Bytes(make([]byte, 2<<20))), "a few KiB compressed")
			err = cs.RecvMsg(new(wrapperspb.BytesValue))
			assert.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
			assert.ErrorContains(t, err, "after decompression larger than max")
			assert.Error(t, handlerEnded(t), "the fallback's call is cancelled")
		}},
		{"client cancels mid-stream", func(t *testing.T) {
			cctx, ccancel := context.WithCancel(ctx)
			defer ccancel()
			cs, err := chatStream(cctx, cc)
			require.NoError(t, err)
			require.NoError(t, cs.SendMsg(wrapperspb.Bytes([]byte("wait"))))
			require.NoError(t, cs.RecvMsg(new(wrapperspb.BytesValue)))
			ccancel()
			assert.Equal(t, codes.Canceled, status.Code(cs.RecvMsg(new(wrapperspb.BytesValue))))
			assert.ErrorIs(t, handlerEnded(t), context.Canceled, "the fallback's call ends with the client's")
		}},
		{"deadline passes mid-stream", func(t *testing.T) {
			dctx, dcancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer dcancel()
			cs, err := chatStream(dctx, cc)
			require.NoError(t, err)
			require.NoError(t, cs.SendMsg(wrapperspb.Bytes([]byte("wait"))))
			require.NoError(t, cs.RecvMsg(new(wrapperspb.BytesValue)))
			assert.Equal(t, codes.DeadlineExceeded, status.Code(cs.RecvMsg(new(wrapperspb.BytesValue))))
			err = handlerEnded(t)
			assert.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled), "%v", err)
		}},
		{"error with details and trailers", func(t *testing.T) {
			cs, err := chatStream(ctx, cc)
			require.NoError(t, err)
			require.NoError(t, cs.SendMsg(wrapperspb.Bytes([]byte("echo me"))))
			got := new(wrapperspb.BytesValue)
			require.NoError(t, cs.RecvMsg(got))
			assert.Equal(t, "echo me", string(got.GetValue()))
			require.NoError(t, cs.SendMsg(wrapperspb.Bytes([]byte("fail"))))
			err = cs.RecvMsg(got)
			st := status.Convert(err)
			assert.Equal(t, codes.FailedPrecondition, st.Code())
			assert.Equal(t, "failed on purpose: 100% ü", st.Message())
			require.Len(t, st.Details(), 1)
			assert.True(t, proto.Equal(wrapperspb.String("the detail"), st.Details()[0].(proto.Message)))
			assert.Equal(t, []string{"failed"}, cs.Trailer().Get("x-trailer"))
			assert.Equal(t, []string{"\x00\xff"}, cs.Trailer().Get("x-trailer-bin"))
			assert.Error(t, handlerEnded(t))
		}},
		{"error before any message: trailers-only", func(t *testing.T) {
			cs, err := chatStream(ctx, cc)
			require.NoError(t, err)
			require.NoError(t, cs.SendMsg(wrapperspb.Bytes([]byte("fail"))))
			err = cs.RecvMsg(new(wrapperspb.BytesValue))
			assert.Equal(t, codes.FailedPrecondition, status.Code(err))
			assert.Equal(t, []string{"failed"}, cs.Trailer().Get("x-trailer"))
			assert.Error(t, handlerEnded(t))
		}},
		{"metadata to the handler, headers and trailers back", func(t *testing.T) {
			mctx := metadata.AppendToOutgoingContext(ctx, "x-echo", "one", "x-echo", "two", "x-echo-bin", "\x00\x01\xfe\xff")
			cs, err := chatStream(mctx, cc)
			require.NoError(t, err)
			require.NoError(t, cs.SendMsg(wrapperspb.Bytes([]byte("hello"))))
			require.NoError(t, cs.CloseSend())
			hdr, err := cs.Header()
			require.NoError(t, err)
			assert.Equal(t, []string{"one", "two"}, hdr.Get("x-echo"))
			assert.Equal(t, []string{"\x00\x01\xfe\xff"}, hdr.Get("x-echo-bin"))
			got := new(wrapperspb.BytesValue)
			require.NoError(t, cs.RecvMsg(got))
			assert.Equal(t, "hello", string(got.GetValue()))
			assert.ErrorIs(t, cs.RecvMsg(got), io.EOF)
			assert.Equal(t, []string{"t"}, cs.Trailer().Get("x-trailer"))
			assert.Equal(t, []string{"one", "two"}, cs.Trailer().Get("x-echo"))
			assert.NoError(t, handlerEnded(t))
		}},
		{"a message past MaxRecvMsgSize", func(t *testing.T) {
			cs, err := chatStream(ctx, cc)
			require.NoError(t, err)
			require.NoError(t, cs.SendMsg(wrapperspb.Bytes(make([]byte, 1<<20))))
			err = cs.RecvMsg(new(wrapperspb.BytesValue))
			assert.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
			// The fallback's call, if it started before the refusal, is
			// cancelled: its handler ends, its end is dropped.
			gone(t, "unary_test.(*chat)")
			select {
			case <-ch.ended:
			default:
			}
		}},
		{"many streams at once, half cancelled at random moments", func(t *testing.T) {
			const streams = 40
			var wg sync.WaitGroup
			errs := make(chan error, streams)
			for i := range streams {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(i), 11))
					msgs := bigMessages(r, 1+r.IntN(8))
					if i%2 == 0 {
						errs <- exchange(ctx, cc, msgs)
						return
					}
					cctx, ccancel := context.WithCancel(ctx)
					time.AfterFunc(time.Duration(r.IntN(20))*time.Millisecond, ccancel)
					err := exchange(cctx, cc, msgs)
					if err != nil && status.Code(errors.Unwrap(err)) != codes.Canceled && status.Code(err) != codes.Canceled {
						errs <- fmt.Errorf("cancelled stream %d: %w", i, err)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				assert.NoError(t, err)
			}
			gone(t, "unary.(*conn).proxy", "unary_test.(*chat)") // every handler has ended (a cancelled call's may never have started)
			for len(ch.ended) > 0 {
				<-ch.ended
			}
		}},
		{"unary calls among streams", func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for i := range 4 {
				wg.Go(func() {
					errs <- exchange(ctx, cc, bigMessages(rand.New(rand.NewPCG(uint64(i), 7)), 12))
				})
			}
			for i := range 8 {
				wg.Go(func() {
					for j := range 50 {
						v := fmt.Sprintf("caller %d call %d", i, j)
						resp, err := rls.ShouldRateLimit(ctx, request("d", v))
						if err == nil && resp.GetResponseHeadersToAdd()[0].GetValue() != v {
							err = fmt.Errorf("answer %q to %q", resp.GetResponseHeadersToAdd()[0].GetValue(), v)
						}
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				assert.NoError(t, err)
			}
			for range 4 {
				assert.NoError(t, handlerEnded(t))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t)
			// No goroutine of a proxied call, nor a handler, is left; and
			// the count is back to the connection's (give or take one of
			// grpc-go's, which may start late on the pipe's connection).
			gone(t, "unary.(*conn).proxy", "unary_test.(*chat)")
			settle(t, warm+1)
		})
	}
	s.stop(t, base, cc)
}

// TestProxyRaw: what a client that speaks frames sees of a proxied call.
// A message past the bound after the answer's headers ends the call with
// trailers (no :status) and RST_STREAM; a client that sends faster than
// the fallback reads stops being given window: the server holds at most a
// window and a message of its (the fallback's own windows aside), not all
// it would send.
func TestProxyRaw(t *testing.T) {
	base := runtime.NumGoroutine()
	ch := &chat{ended: make(chan error, 16)}
	s := serve(t, unary.Config{MaxRecvMsgSize: 1 << 20}, ch.register)
	msg := func(v []byte) []byte { b, _ := proto.Marshal(wrapperspb.Bytes(v)); return framed(b) }
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, r *rawClient)
	}{
		{"past the bound after headers", func(t *testing.T, r *rawClient) {
			r.headers(3, chatMethod, false)
			require.NoError(t, r.fr.WriteData(3, false, msg([]byte("x"))))
			var seen []string
			for len(seen) < 2 {
				switch f := r.read().(type) {
				case *http2.MetaHeadersFrame:
					seen = append(seen, "headers "+f.PseudoValue("status"))
				case *http2.DataFrame:
					seen = append(seen, "data")
				}
			}
			require.Equal(t, []string{"headers 200", "data"}, seen)
			require.NoError(t, r.fr.WriteData(3, false, []byte{0, 0, 0x20, 0, 0}))
			f, ok := r.read().(*http2.MetaHeadersFrame)
			require.True(t, ok, "%v", f)
			assert.True(t, f.StreamEnded())
			assert.Empty(t, f.PseudoValue("status"), "trailers carry no :status")
			assert.Equal(t, "8", fieldValue(f, "grpc-status"))
			rst, ok := r.read().(*http2.RSTStreamFrame)
			require.True(t, ok)
			assert.Equal(t, http2.ErrCodeNo, rst.ErrCode)
			assert.Error(t, <-ch.ended)
		}},
		{"a fallback that does not read", func(t *testing.T, r *rawClient) {
			r.headers(3, chatMethod, false)
			require.NoError(t, r.fr.WriteData(3, false, msg([]byte("wait"))))
			chunk := msg(make([]byte, 16<<10-5-3))
			window, sent := int64(65535-len(msg([]byte("wait")))), 0
			for sent < 64<<20 {
				if window >= int64(len(chunk)) {
					require.NoError(t, r.fr.WriteData(3, false, chunk))
					window -= int64(len(chunk))
					sent += len(chunk)
					continue
				}
				_ = r.nc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
				f, err := r.fr.ReadFrame()
				if err != nil {
					break // no window given for 500 ms: held
				}
				if wu, ok := f.(*http2.WindowUpdateFrame); ok && wu.StreamID == 3 {
					window += int64(wu.Increment)
				}
			}
			t.Logf("%d KiB sent before the window was held", sent>>10)
			assert.Less(t, sent, 4<<20, "the stream's window is held once the fallback stops reading")
			require.NoError(t, r.fr.WriteRSTStream(3, http2.ErrCodeCancel))
			assert.ErrorIs(t, <-ch.ended, context.Canceled)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, s.addr)
			r.call(1, rlsMethod, echoMsg("d", "v"))
			require.Equal(t, "200 0", first(r.answer(1)))
			tc.run(t, r)
		})
	}
	s.stop(t, base+2) // the raw clients' connections, closed at cleanup
}

// TestProxyConnections: each connection's proxied calls are bound by the
// fallback's bounds of a connection, not every connection's at once: with
// the fallback's MaxConcurrentStreams at 1, a long stream on each of
// three connections runs.
func TestProxyConnections(t *testing.T) {
	base := runtime.NumGoroutine()
	ch := &chat{ended: make(chan error, 16)}
	s := serveWith(t, unary.Config{}, []grpc.ServerOption{grpc.MaxConcurrentStreams(1)}, ch.register)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	const conns = 3
	var ccs []*grpc.ClientConn
	for i := range conns {
		cc := dial(t, s.addr, nil)
		ccs = append(ccs, cc)
		_, err := rlsv3.NewRateLimitServiceClient(cc).ShouldRateLimit(ctx, request("d", "first"))
		require.NoError(t, err)
		cs, err := chatStream(ctx, cc)
		require.NoError(t, err)
		require.NoError(t, cs.SendMsg(wrapperspb.Bytes([]byte("wait"))))
		require.NoError(t, cs.RecvMsg(new(wrapperspb.BytesValue)), "connection %d's stream", i)
	}
	cancel()
	for range conns {
		assert.Error(t, <-ch.ended)
	}
	s.stop(t, base, ccs...)
}

// TestProxyShutdown: Shutdown's GOAWAY lets a proxied stream in flight run
// to its end, and returns once it has; a Shutdown whose context ends
// first cuts it.
func TestProxyShutdown(t *testing.T) {
	for _, tc := range []struct {
		name   string
		finish bool // the client ends the stream before Shutdown's context
	}{
		{"stream ends", true},
		{"context ends first", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := &chat{ended: make(chan error, 16)}
			s := serve(t, unary.Config{}, ch.register)
			cc := dial(t, s.addr, nil)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := rlsv3.NewRateLimitServiceClient(cc).ShouldRateLimit(ctx, request("d", "first"))
			require.NoError(t, err)
			cs, err := chatStream(ctx, cc)
			require.NoError(t, err)
			got := new(wrapperspb.BytesValue)
			require.NoError(t, cs.SendMsg(wrapperspb.Bytes([]byte("before"))))
			require.NoError(t, cs.RecvMsg(got))

			sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
			if !tc.finish {
				sctx, scancel = context.WithTimeout(ctx, 200*time.Millisecond)
			}
			defer scancel()
			shut := make(chan error, 1)
			go func() { shut <- s.srv.Shutdown(sctx) }()
			if !tc.finish {
				assert.ErrorIs(t, <-shut, context.DeadlineExceeded)
				assert.Error(t, cs.RecvMsg(got), "cut")
				assert.Error(t, <-ch.ended)
				return
			}
			select {
			case err := <-shut:
				t.Fatalf("Shutdown returned %v with a stream in flight", err)
			case <-time.After(100 * time.Millisecond):
			}
			require.NoError(t, cs.SendMsg(wrapperspb.Bytes([]byte("after GOAWAY"))))
			require.NoError(t, cs.RecvMsg(got))
			assert.Equal(t, "after GOAWAY", string(got.GetValue()))
			require.NoError(t, cs.CloseSend())
			assert.ErrorIs(t, cs.RecvMsg(got), io.EOF)
			assert.NoError(t, <-shut)
			assert.NoError(t, <-ch.ended)
		})
	}
}

// steady is the most goroutines seen over 200 ms: the baseline of a
// connection, its client of the fallback made, some of whose goroutines
// (grpc-go's) start a little after its first call.
func steady() int {
	n := runtime.NumGoroutine()
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		n = max(n, runtime.NumGoroutine())
	}
	return n
}

// gone waits until no goroutine runs a function whose name holds one of
// frames, failing the test after 5 s and showing them.
func gone(t testing.TB, frames ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var left []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			for _, f := range frames {
				if strings.Contains(g, f) {
					left = append(left, g)
					break
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestProxyBDPPings: a client that pings as grpc-go's BDP estimator does,
// once data follows the ack of its last ping, with a window update, is
// never told "too_many_pings" while a proxied answer streams to it, its
// window letting the answer out a KiB at a time: data written when a
// window update lets it out counts as data, as grpc-go's server counts
// every DATA frame it writes.
func TestProxyBDPPings(t *testing.T) {
	base := runtime.NumGoroutine()
	ch := &chat{ended: make(chan error, 4)}
	s := serve(t, unary.Config{MaxRecvMsgSize: 1 << 20}, ch.register)
	r := dialRaw(t, s.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1024})
	r.call(1, rlsMethod, echoMsg("d", "v")) // a connection the transport serves
	require.Equal(t, "200 0", first(r.answer(1)))
	b, _ := proto.Marshal(wrapperspb.Bytes(make([]byte, 48<<10)))
	msg := framed(b)
	want := len(msg)
	r.headers(3, chatMethod, false)
	for len(msg) > 0 {
		n := min(len(msg), 16<<10)
		require.NoError(t, r.fr.WriteData(3, false, msg[:n]))
		msg = msg[n:]
	}
	got, pinging, pings := 0, false, 0
	// send writes a frame; if the server has closed, it fails with the
	// GOAWAY the server sent first.
	send := func(err error) {
		t.Helper()
		if err == nil {
			return
		}
		for {
			f, rerr := r.readErr()
			if rerr != nil {
				t.Fatalf("the server closed after %d pings, %d of %d bytes: %v", pings, got, want, err)
			}
			if g, ok := f.(*http2.GoAwayFrame); ok {
				t.Fatalf("GOAWAY %v %q after %d pings, %d of %d bytes", g.ErrCode, g.DebugData(), pings, got, want)
			}
		}
	}
	for got < want {
		switch f := r.read().(type) {
		case *http2.DataFrame:
			n := uint32(len(f.Data()))
			if n == 0 {
				continue
			}
			got += int(n)
			send(r.fr.WriteWindowUpdate(3, n))
			send(r.fr.WriteWindowUpdate(0, n))
			if !pinging {
				send(r.fr.WritePing(false, [8]byte{byte(pings)}))
				pinging = true
				pings++
			}
		case *http2.PingFrame:
			require.True(t, f.IsAck())
			pinging = false
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v %q after %d pings, %d of %d bytes", f.ErrCode, f.DebugData(), pings, got, want)
		}
	}
	assert.Greater(t, pings, 2*3, "the pings the test meant to send")
	require.NoError(t, r.fr.WriteRSTStream(3, http2.ErrCodeCancel))
	assert.Error(t, <-ch.ended)
	s.stop(t, base+1) // the raw client's connection, closed at cleanup
}
