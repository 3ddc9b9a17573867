package unary_test

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	"github.com/actorlimit/actorlimit/service/unary"
)

// nullAnswer is the answer of the null handlers: OK, with no status.
var nullAnswer = []byte{0x08, 0x01}

// rawMsg is a message's bytes, for a codec that passes them through.
type rawMsg []byte

// rawCodec passes rawMsg through, so that both servers do the same (no)
// decoding and encoding, and the benchmark measures their transports.
type rawCodec struct{}

func (rawCodec) Name() string { return protoenc.Name }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*rawMsg))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*rawMsg) = data.Materialize()
	return nil
}

var _ encoding.CodecV2 = rawCodec{}

// nullDesc is a RateLimitService on grpc-go that answers nullAnswer.
var nullDesc = grpc.ServiceDesc{
	ServiceName: "envoy.service.ratelimit.v3.RateLimitService",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "ShouldRateLimit", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		var in rawMsg
		if err := dec(&in); err != nil {
			return nil, err
		}
		out := rawMsg(nullAnswer)
		return &out, nil
	}}},
}

// BenchmarkNullServer compares, in process, grpc-go's server with this
// transport, both answering every call with the same bytes and no
// decoding, from a grpc-go client on one connection: one caller, and 16
// at once. The figures hold the client's work (about 90 allocations a
// call are grpc-go's client's).
func BenchmarkNullServer(b *testing.B) {
	req := rawMsg(echoMsg("d", "v"))
	for _, server := range []string{"grpc", "direct"} {
		b.Run("server="+server, func(b *testing.B) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(b, err)
			switch server {
			case "grpc":
				gs := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}))
				gs.RegisterService(&nullDesc, nil)
				go func() { _ = gs.Serve(l) }()
				defer gs.Stop()
			case "direct":
				srv, err := unary.New(unary.Config{Handlers: map[string]unary.Handler{
					rlsMethod: func(_ context.Context, _ string, _, dst []byte) ([]byte, error) {
						return append(dst, nullAnswer...), nil
					},
				}})
				require.NoError(b, err)
				go func() { _ = srv.Serve(l) }()
				defer srv.Close()
			}
			cc := dial(b, l.Addr().String(), nil)
			call := func() {
				var out rawMsg
				if err := cc.Invoke(context.Background(), rlsMethod, &req, &out, grpc.ForceCodecV2(rawCodec{})); err != nil {
					b.Error(err)
				}
			}
			call()
			for _, callers := range []int{1, 16} {
				b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
					b.ReportAllocs()
					if callers == 1 {
						for b.Loop() {
							call()
						}
						return
					}
					b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							call()
						}
					})
				})
			}
		})
	}
}

var _ = rlsv3.RateLimitRequest{}
