package service

import (
	"context"
	"slices"
	"sync"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Codec is the gRPC codec of a server that serves a Server: a
// RateLimitRequest's wire bytes are checked by Bounds.ScanRequest before
// they are decoded, so that a request past a bound costs its bytes and no
// objects; every other message (the health service's, the answers) goes
// through gRPC's standard proto codec. Register it with
// grpc.ForceServerCodecV2 together with its interceptor:
//
//	codec := service.NewCodec(srv)
//	gs := grpc.NewServer(grpc.ForceServerCodecV2(codec), grpc.ChainUnaryInterceptor(codec.Interceptor))
//
// gRPC turns a codec's error into codes.Internal; a request refused by the
// scan or that does not decode is instead decoded as an empty request that
// the interceptor recognises and answers with InvalidArgument, naming the
// bound (and counted as an invalid request in the Server's metrics).
// Without the interceptor, refused requests would be kept.
type Codec struct {
	s        *Server
	fallback encoding.CodecV2
	// refused maps a refused *rlsv3.RateLimitRequest, between its decoding
	// and the interceptor, to its error.
	refused sync.Map
}

var _ encoding.CodecV2 = (*Codec)(nil)

// NewCodec returns the codec of a gRPC server that serves s, with s's
// bounds.
func NewCodec(s *Server) *Codec {
	return &Codec{s: s, fallback: encoding.GetCodecV2(protoenc.Name)}
}

// Name is "proto": the codec replaces the standard one for the content
// type it serves.
func (c *Codec) Name() string { return protoenc.Name }

// Marshal encodes v: a RateLimitResponse of the shape the Server answers
// into a buffer of gRPC's pool (freed by gRPC once written), any other
// message, or an answer with fields the Server never sets, with the
// standard proto codec. The bytes are proto.Marshal's.
func (c *Codec) Marshal(v any) (mem.BufferSlice, error) {
	resp, ok := v.(*rlsv3.RateLimitResponse)
	if !ok {
		return c.fallback.Marshal(v)
	}
	size, ok := responseSize(resp)
	if !ok {
		return c.fallback.Marshal(v)
	}
	pool := mem.DefaultBufferPool()
	// A buffer past gRPC's pooling threshold (1 KiB), so that mem.NewBuffer
	// returns it to the pool once the answer is written.
	buf := pool.Get(max(size, pooledAnswer))
	*buf = appendResponse((*buf)[:0], resp)
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// pooledAnswer is the capacity of an answer's buffer: one of the default
// pool's sizes, past the threshold under which gRPC does not pool.
const pooledAnswer = 4 << 10

// Unmarshal decodes data into v: a RateLimitRequest after the scan (with
// the codec's own decoder where it can, else proto.Unmarshal), any other
// message with the standard proto codec.
func (c *Codec) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*rlsv3.RateLimitRequest)
	if !ok {
		return c.fallback.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	if err := c.decode(buf.ReadOnlyData(), req); err != nil {
		c.refused.Store(req, err)
	}
	return nil
}

// decode decodes wire into req, which must be empty, after the scan: nil,
// or the refusal (req left empty) that the Server answers.
func (c *Codec) decode(wire []byte, req *rlsv3.RateLimitRequest) error {
	err := c.s.bounds.ScanRequest(wire)
	if err == nil {
		if decodeRequest(wire, req) {
			return nil
		}
		if uerr := proto.Unmarshal(wire, req); uerr != nil {
			err = invalid(refusedMalformed, "the request is not a RateLimitRequest: %v", uerr)
		}
	}
	if err != nil {
		req.Reset()
	}
	return err
}

// DecodeRequest is what Unmarshal and Interceptor do together, for a
// transport other than grpc-go's: it returns the request of wire (a
// RateLimitRequest's bytes, not retained), or the error the Server answers
// a refused one with (InvalidArgument naming the bound), counted in the
// Server's metrics as the interceptor counts it. Decide the request with
// Server.ShouldRateLimit and encode the answer with AppendResponse: the
// answer's bytes and the statuses are those of the grpc-go path.
func (c *Codec) DecodeRequest(wire []byte) (*rlsv3.RateLimitRequest, error) {
	req := new(rlsv3.RateLimitRequest)
	if err := c.decode(wire, req); err != nil {
		c.countRefused(err)
		return nil, err
	}
	return req, nil
}

// AppendResponse appends the wire bytes of resp to b, as Marshal encodes
// them; an answer that does not encode is an Internal error, as grpc-go
// answers a codec's.
func (c *Codec) AppendResponse(b []byte, resp *rlsv3.RateLimitResponse) ([]byte, error) {
	if size, ok := responseSize(resp); ok {
		return appendResponse(slices.Grow(b, size), resp), nil
	}
	out, err := proto.MarshalOptions{}.MarshalAppend(b, resp)
	if err != nil { // the status grpc-go answers a codec's error with
		return nil, status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	return out, nil
}

// countRefused counts a refused request in the Server's metrics.
func (c *Codec) countRefused(err error) {
	if m := c.s.o.Metrics; m != nil {
		m.codes["invalid"].Inc()
	}
	c.s.countRefusal(err)
}

// Interceptor answers a request that Unmarshal refused with its error,
// and passes every other call on.
func (c *Codec) Interceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	// A refused request was decoded empty; a request that decoded is not
	// looked up (a domain is required), so deciding one costs no map lookup.
	if r, ok := req.(*rlsv3.RateLimitRequest); ok && r.GetDomain() == "" && len(r.GetDescriptors()) == 0 {
		if err, ok := c.refused.LoadAndDelete(r); ok {
			c.countRefused(err.(error))
			return nil, err.(error)
		}
	}
	return handler(ctx, req)
}
