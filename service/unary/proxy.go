package unary

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// This file proxies, in process, the calls of a connection served here
// for methods not served here to the fallback: each such call becomes a
// stream of a grpc-go client whose connection is a net.Pipe given to the
// fallback's listener, its messages passed through as bytes.

// proxyOutLimit bounds the bytes of a proxied call's answer read from the
// fallback and not yet written to the client: past it the proxy reads no
// more from the fallback until the client's windows let them out.
const proxyOutLimit = 64 << 10

// proxyDesc is every proxied call's: a stream both ways, whatever the
// method's own shape (the fallback checks it).
var proxyDesc = grpc.StreamDesc{ClientStreams: true, ServerStreams: true}

// rawCodec passes messages through as bytes, a *[]byte: Marshal sends
// them as they are; Unmarshal gives the message with a gRPC prefix ahead
// of it (uncompressed, its length), ready to be written to the client.
// Its name is the client's content-subtype, for the fallback to pick its
// codec.
type rawCodec struct{ name string }

var _ encoding.CodecV2 = rawCodec{}

func (c rawCodec) Name() string { return c.name }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	n := data.Len()
	b := make([]byte, 5+n)
	p := grpcPrefix(n)
	copy(b, p[:])
	off := 5
	for _, buf := range data {
		off += copy(b[off:], buf.ReadOnlyData())
	}
	*v.(*[]byte) = b
	return nil
}

// errProxyClosed is a proxied call's error once its connection closed.
var errProxyClosed = status.Error(codes.Unavailable, "unary: connection closed")

// proxyConn returns the connection's client of the fallback, made on
// first use. A connection has its own, so that the fallback's bounds of a
// connection (its MaxConcurrentStreams above all: a client's RLQS streams
// live long) bind each client's proxied calls as they would bind them
// on a connection handed off, not every client's at once.
func (c *conn) proxyConn() (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errProxyClosed
	}
	if c.pxCC == nil {
		cc, err := grpc.NewClient("passthrough:///unary-fallback",
			grpc.WithTransportCredentials(insecure.NewCredentials()), // a net.Pipe, in process
			grpc.WithContextDialer(c.s.dialFallback),
			grpc.WithDisableRetry(), // retries would keep messages
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32)))
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		c.pxCC = cc
	}
	return c.pxCC, nil
}

// endProxies waits, once the connection is closed, for its proxied calls'
// goroutines, which its close cancelled, and closes its client of the
// fallback.
func (c *conn) endProxies() {
	c.pxWG.Wait()
	if c.pxCC != nil {
		_ = c.pxCC.Close()
	}
}

// dialFallback gives one end of a net.Pipe to the fallback's listener.
func (s *Server) dialFallback(context.Context, string) (net.Conn, error) {
	client, server := net.Pipe()
	if !s.fallback.put(server) {
		_ = client.Close()
		_ = server.Close()
		return nil, net.ErrClosed
	}
	return client, nil
}

// proxied is the state of a proxied call, guarded by conn.mu but for the
// channels.
//
// Its goroutines: recv opens the fallback's stream, starts send, and
// relays the answer (headers, messages, status and trailers); send relays
// the client's messages and its END_STREAM. Both end when the call ends:
// answered, reset by the client (its context, the stream, ends), past its
// deadline, or the connection closed.
type proxied struct {
	md        metadata.MD
	authority string
	comp      encoding.Compressor // the call's grpc-encoding; nil: identity

	// From the client: the message being read, then the messages read and
	// not yet sent to the fallback. The stream's window is given back
	// only while none waits, so that a client that sends faster than the
	// fallback reads holds at most a window and a message here.
	hdr    [5]byte
	hdrN   int
	msg    []byte
	msgLen int // -1 before its prefix
	queue  []inMsg
	queued int
	wake   chan struct{} // the sender has something to do

	// To the client.
	headersSent bool
	out         [][]byte // messages, prefixed, the first written up to outOff
	outOff      int
	outBytes    int
	trailers    []byte // the status and trailers, once the call ended
	blocked     bool   // in conn.blocked
	room        chan struct{}
	running     int // goroutines
}

// inMsg is a message read from the client, its compressed flag set.
type inMsg struct {
	b          []byte
	compressed bool
}

// startProxy starts a proxied call.
func (c *conn) startProxy(id uint32, endStream bool, path, sub, enc string, timeoutSet bool, d time.Duration, fields []hpack.HeaderField) {
	md, authority, err := proxyMetadata(fields)
	if err != nil {
		c.earlyAbort(id, 200, sub, codes.Internal, err.Error(), !endStream)
		return
	}
	st := c.newStream(id, nil, path, sub, timeoutSet, d)
	st.px = &proxied{md: md, authority: authority, msgLen: -1, wake: make(chan struct{}, 1), room: make(chan struct{}, 1), running: 1}
	if enc != "" && enc != "identity" {
		st.px.comp = encoding.GetCompressor(enc)
	}
	st.started = true
	st.ended = endStream
	c.pxWG.Add(1)
	go c.proxyRecv(st)
}

// proxyMetadata is the metadata of a call's header fields, as grpc-go's
// server gives its handlers: not the pseudo-headers, HTTP/2's connection
// headers nor those gRPC reserves; -bin values decoded.
func proxyMetadata(fields []hpack.HeaderField) (metadata.MD, string, error) {
	md := metadata.MD{}
	authority, host := "", ""
	for _, hf := range fields {
		switch hf.Name {
		case ":authority":
			authority = hf.Value
			continue
		case "host":
			host = hf.Value
			continue
		case "content-type", "user-agent", "te", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding",
			"grpc-message-type", "grpc-message", "grpc-status", "connection", "keep-alive",
			"proxy-connection", "transfer-encoding", "upgrade":
			continue
		}
		if strings.HasPrefix(hf.Name, ":") {
			continue
		}
		v := hf.Value
		if strings.HasSuffix(hf.Name, "-bin") {
			b, err := decodeBin(v)
			if err != nil {
				return nil, "", fmt.Errorf("malformed binary metadata %q in header %q: %v", v, hf.Name, err)
			}
			v = string(b)
		}
		md[hf.Name] = append(md[hf.Name], v)
	}
	if authority == "" {
		authority = host
	}
	return md, authority, nil
}

// decodeBin decodes a -bin value, padded or not, as grpc-go does.
func decodeBin(v string) ([]byte, error) {
	if len(v)%4 == 0 {
		return base64.StdEncoding.DecodeString(v)
	}
	return base64.RawStdEncoding.DecodeString(v)
}

// proxyData takes a proxied call's bytes from the client: whole messages
// go to the sender; false when the call was refused here.
func (c *conn) proxyData(st *stream, data []byte, endStream bool) bool {
	px := st.px
	for len(data) > 0 {
		if px.msgLen < 0 {
			k := copy(px.hdr[px.hdrN:], data)
			px.hdrN += k
			data = data[k:]
			if px.hdrN < 5 {
				break
			}
			b := px.hdr
			length := int(uint32(b[1])<<24 | uint32(b[2])<<16 | uint32(b[3])<<8 | uint32(b[4]))
			switch {
			case length > c.cfg.MaxRecvMsgSize:
				c.proxyAbort(st, codes.ResourceExhausted, fmt.Sprintf("grpc: received message larger than max (%d vs. %d)", length, c.cfg.MaxRecvMsgSize))
				return false
			case b[0] == 1 && px.comp == nil:
				c.proxyAbort(st, codes.Internal, "grpc: compressed flag set with identity or empty encoding")
				return false
			case b[0] > 1:
				c.proxyAbort(st, codes.Internal, fmt.Sprintf("grpc: received unexpected payload format %d", b[0]))
				return false
			}
			px.msgLen, px.msg = length, make([]byte, 0, length)
		}
		k := min(px.msgLen-len(px.msg), len(data))
		px.msg = append(px.msg, data[:k]...)
		data = data[k:]
		if len(px.msg) == px.msgLen {
			px.queue = append(px.queue, inMsg{px.msg, px.hdr[0] == 1})
			px.queued += 5 + px.msgLen
			px.msg, px.msgLen, px.hdrN = nil, -1, 0
			signal(px.wake)
		}
	}
	if endStream {
		st.ended = true
		if px.hdrN > 0 {
			c.proxyAbort(st, codes.Internal, io.ErrUnexpectedEOF.Error())
			return false
		}
		signal(px.wake)
		return true
	}
	if px.queued == 0 && st.unacked >= initialWindow/4 {
		c.giveWindow(st)
	}
	return true
}

// giveWindow gives a stream's window back for what was read.
func (c *conn) giveWindow(st *stream) {
	c.writeWindowUpdate(st.id, uint32(st.unacked))
	st.recvWindow += st.unacked
	st.unacked = 0
}

// signal wakes a goroutine waiting on ch, a channel of capacity 1.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// proxyRecv opens the fallback's stream and relays its answer.
func (c *conn) proxyRecv(st *stream) {
	defer c.pxWG.Done()
	defer st.cancel(context.Canceled) // the sender returns
	defer c.proxyExit(st)
	px := st.px
	cc, err := c.proxyConn()
	var cs grpc.ClientStream
	if err == nil {
		name := st.subtype
		if name == "" {
			name = "proto"
		}
		opts := []grpc.CallOption{grpc.ForceCodecV2(rawCodec{name: name})}
		if px.authority != "" {
			opts = append(opts, grpc.CallAuthority(px.authority))
		}
		cs, err = cc.NewStream(metadata.NewOutgoingContext(st, px.md), &proxyDesc, st.method, opts...)
	}
	if err != nil {
		c.proxyEnd(st, err, nil)
		return
	}
	c.mu.Lock()
	px.running++
	c.mu.Unlock()
	c.pxWG.Add(1)
	go c.proxySend(st, cs)

	hdr, _ := cs.Header() // nil when the call failed: RecvMsg says how
	if hdr != nil {
		c.proxyHeaders(st, hdr)
	}
	for {
		var m []byte
		if err = cs.RecvMsg(&m); err != nil {
			break
		}
		if !c.proxyOut(st, m) {
			return
		}
	}
	c.proxyEnd(st, err, cs.Trailer())
}

// proxySend relays the client's messages and END_STREAM to the fallback.
func (c *conn) proxySend(st *stream, cs grpc.ClientStream) {
	defer c.pxWG.Done()
	defer c.proxyExit(st)
	px := st.px
	done := st.Done()
	for {
		c.mu.Lock()
		var in inMsg
		have := len(px.queue) > 0
		if have {
			in = px.queue[0]
			px.queue[0] = inMsg{}
			px.queue = px.queue[1:]
		}
		ended, gone := st.ended, st.gone
		c.mu.Unlock()
		switch {
		case have:
			msg := in.b
			if in.compressed {
				var err error
				if msg, err = c.decompress(px.comp, msg); err != nil {
					c.mu.Lock()
					if !st.gone && !c.closed {
						s := status.Convert(err)
						c.proxyAbort(st, s.Code(), s.Message())
						c.flushLocked()
					}
					c.mu.Unlock()
					return
				}
			}
			if cs.SendMsg(&msg) != nil {
				return // the call ended: the receiver has its status
			}
			c.mu.Lock()
			if px.queued -= 5 + len(in.b); px.queued == 0 && st.unacked > 0 && !st.ended && !st.gone && !c.closed {
				c.giveWindow(st)
				c.flushLocked()
			}
			c.mu.Unlock()
		case gone:
			return
		case ended:
			_ = cs.CloseSend()
			return
		default:
			select {
			case <-px.wake:
			case <-done:
			}
		}
	}
}

// decompress decompresses a message, bounded by MaxRecvMsgSize, with
// grpc-go's statuses.
func (c *conn) decompress(comp encoding.Compressor, b []byte) ([]byte, error) {
	r, err := comp.Decompress(bytes.NewReader(b))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: failed to decompress the received message: %v", err)
	}
	out, err := io.ReadAll(io.LimitReader(r, int64(c.cfg.MaxRecvMsgSize)+1))
	switch {
	case err != nil:
		return nil, status.Errorf(codes.Internal, "grpc: failed to decompress the received message: %v", err)
	case len(out) > c.cfg.MaxRecvMsgSize:
		return nil, status.Errorf(codes.ResourceExhausted, "grpc: received message after decompression larger than max %d", c.cfg.MaxRecvMsgSize)
	}
	return out, nil
}

// proxyAbort refuses a proxied call whose request was found wanting: its
// status as trailers (trailers-only before any headers), what waited of
// its answer dropped, RST_STREAM if the client may still be sending.
func (c *conn) proxyAbort(st *stream, code codes.Code, msg string) {
	px := st.px
	if !px.headersSent {
		c.abort(st, code, msg)
		return
	}
	px.out, px.outBytes, px.outOff = nil, 0, 0
	b := appendStatusFields(c.hbuf[:0], uint32(code), msg, nil)
	c.hbuf = b
	c.writeHeaderBlock(st.id, b, true)
	if !st.ended {
		c.writeRST(st.id, http2.ErrCodeNo)
	}
	c.remove(st)
	st.cancel(context.Canceled)
	signal(px.room)
}

// proxyExit notes that one of a proxied call's goroutines ended.
func (c *conn) proxyExit(st *stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.px.running--; st.px.running > 0 {
		return
	}
	st.finished = true
	if st.orphan {
		st.orphan = false
		c.orphans--
	}
}

// proxyHeaders writes the answer's headers.
func (c *conn) proxyHeaders(st *stream, md metadata.MD) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.gone || c.closed {
		return
	}
	b := appendMetadata(c.answerHeaders(st.subtype), md)
	c.hbuf = b
	c.writeHeaderBlock(st.id, b, false)
	st.px.headersSent = true
	c.flushLocked()
}

// appendMetadata appends md's fields but those gRPC reserves, -bin values
// base64-encoded as grpc-go writes them.
func appendMetadata(b []byte, md metadata.MD) []byte {
	for k, vs := range md {
		switch k {
		case "content-type", "grpc-status", "grpc-message", "grpc-status-details-bin", "grpc-encoding",
			"grpc-accept-encoding", "te", "connection":
			continue
		}
		if strings.HasPrefix(k, ":") {
			continue
		}
		bin := strings.HasSuffix(k, "-bin")
		for _, v := range vs {
			if bin {
				v = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			b = appendLiteral(b, k, v)
		}
	}
	return b
}

// proxyOut writes a message of the answer, or queues it for the client's
// windows, and waits while too much is queued; false once the call is
// gone.
func (c *conn) proxyOut(st *stream, m []byte) bool {
	px := st.px
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.gone || c.closed {
		return false
	}
	px.out = append(px.out, m)
	px.outBytes += len(m)
	c.junk = 0
	c.proxyWrite(st)
	c.flushLocked()
	for px.outBytes > proxyOutLimit && !st.gone && !c.closed {
		c.mu.Unlock()
		select {
		case <-px.room:
		case <-st.Done():
		}
		c.mu.Lock()
	}
	return !st.gone && !c.closed
}

// proxyEnd writes the call's status and trailers once its messages are
// written: trailers-only when no headers went.
func (c *conn) proxyEnd(st *stream, err error, trailer metadata.MD) {
	c.mu.Lock()
	defer c.mu.Unlock()
	px := st.px
	if st.gone || c.closed {
		return
	}
	var s *status.Status
	switch {
	case errors.Is(err, io.EOF):
		s = status.New(codes.OK, "")
	default:
		s = statusOf(err)
	}
	var b []byte // its own: the trailers may wait for window
	if !px.headersSent {
		b = append(b, c.answerHeaders(st.subtype)...)
	}
	b = appendMetadata(b, trailer)
	var details []byte
	if p := s.Proto(); len(p.GetDetails()) > 0 {
		details, _ = proto.Marshal(p)
	}
	px.trailers = appendStatusFields(b, uint32(s.Code()), s.Message(), details)
	c.proxyWrite(st)
	c.flushLocked()
}

// proxyWrite writes what the windows let out of a proxied call's answer,
// then its trailers, and puts the call among the blocked when its windows
// stop it.
func (c *conn) proxyWrite(st *stream) {
	px := st.px
	for len(px.out) > 0 {
		m := px.out[0]
		for px.outOff < len(m) {
			n := min(len(m)-px.outOff, c.peerMaxFrame)
			n = int(min(int64(n), c.connSend, st.sendWindow))
			if n <= 0 {
				if !px.blocked {
					px.blocked = true
					c.blocked = append(c.blocked, st)
				}
				return
			}
			c.writeFrameHeader(n, frameData, 0, st.id)
			c.resetPingStrikes = true // each DATA frame written, as grpc-go's server counts them
			c.bw.Write(m[px.outOff : px.outOff+n])
			px.outOff += n
			c.connSend -= int64(n)
			st.sendWindow -= int64(n)
		}
		px.outBytes -= len(m)
		px.out[0] = nil
		px.out, px.outOff = px.out[1:], 0
		if px.outBytes <= proxyOutLimit {
			signal(px.room)
		}
	}
	px.blocked = false
	if px.trailers == nil {
		return
	}
	c.writeHeaderBlock(st.id, px.trailers, true)
	px.trailers = nil
	if !st.ended {
		c.writeRST(st.id, http2.ErrCodeNo)
	}
	c.remove(st)
	st.cancel(context.Canceled)
}
