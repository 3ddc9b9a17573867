package unary

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Flow control and bounds of a connection.
const (
	// initialWindow is HTTP/2's initial window: the server announces no
	// other for its streams, and gives back what it reads.
	initialWindow = 65535
	// connWindow is the connection's receive window, raised from the
	// initial one by a WINDOW_UPDATE once the connection is served.
	connWindow = 1 << 20
	// maxWindow is HTTP/2's largest window.
	maxWindow = 1<<31 - 1
	// junkLimit bounds the frames a client may send that lead to no answer
	// (SETTINGS, resets, frames on closed streams) between two answers;
	// past it the connection is closed with ENHANCE_YOUR_CALM.
	junkLimit = 4096
	// maxPingStrikes is grpc-go's: a third early ping closes.
	maxPingStrikes = 2
	// maxEarlyControl bounds the SETTINGS and PINGs a client may send
	// before its first call; past it the connection is handed off.
	maxEarlyControl = 16
	// drainTimeout bounds how long a connection closing gracefully waits
	// for the client's side to close.
	drainTimeout = time.Second
)

// conn is one connection. Its reader goroutine (serve) reads every frame;
// everything below mu is guarded by it, the writer among them.
type conn struct {
	s   *Server
	cfg *Config
	raw net.Conn // as accepted
	nc  net.Conn // raw, or its *tls.Conn
	rec recorder
	br  *bufio.Reader
	fr  *http2.Framer

	activity atomic.Bool // a frame read since the keepalive timer looked

	mu                sync.Mutex
	bw                *bufio.Writer
	dirty             bool   // bw holds bytes not flushed
	urgent            bool   // bw holds more than PING ACKs
	flushes           uint64 // flushes so far
	tableSized        bool   // the table size update written
	fast              bool   // decided: served here
	closed            bool
	goingAway         bool
	draining          bool // GOAWAY sent, no streams: the write side closed
	streams           map[uint32]*stream
	lastID            uint32
	pending           int // handlers running
	orphans           int // handlers running on streams gone
	blocked           []*stream
	connSend          int64 // what the server may send
	connRecv          int64 // what the client may send
	connUnacked       int64
	peerInitialWindow int64
	peerMaxFrame      int
	junk              int
	pingStrikes       int
	lastPingAt        time.Time
	resetPingStrikes  bool
	pingOutstanding   bool
	kaTimer, ageTimer *time.Timer
	scratch           []byte // a frame header
	hbuf              []byte // a header block
	early             early  // what the client sent before its first call
	recentResets      [32]uint32
	hdec              *hpack.Decoder // the connection's, once served
	hdr               headerBlock    // the header block being read
	nextReset         int
	pxCC              *grpc.ClientConn // the fallback's client, for proxied calls
	pxWG              sync.WaitGroup   // proxied calls' goroutines
}

func newConn(s *Server, nc net.Conn) *conn {
	return &conn{s: s, cfg: &s.cfg, raw: nc, nc: nc, streams: map[uint32]*stream{},
		connSend: initialWindow, connRecv: initialWindow, peerInitialWindow: initialWindow, peerMaxFrame: 16384}
}

// recorder keeps the bytes read until the connection is decided, for the
// fallback to read again.
type recorder struct {
	r     io.Reader
	on    bool
	buf   []byte
	limit int
}

var errRecordFull = errors.New("unary: too many bytes before the first call")

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if r.on {
		r.buf = append(r.buf, p[:n]...)
		if len(r.buf) > r.limit {
			return n, errRecordFull
		}
	}
	return n, err
}

// deadlineWriter bounds each write to a connection.
type deadlineWriter struct {
	nc      net.Conn
	timeout time.Duration
}

func (w deadlineWriter) Write(p []byte) (int, error) {
	_ = w.nc.SetWriteDeadline(time.Now().Add(w.timeout))
	return w.nc.Write(p)
}

// serve is the connection's reader goroutine.
func (c *conn) serve() {
	defer c.s.untrack(c)
	handedOff := false
	defer func() {
		if !handedOff {
			c.close()
			c.endProxies()
		}
	}()
	deadline := time.Now().Add(c.cfg.HandshakeTimeout)
	_ = c.raw.SetDeadline(deadline)
	if c.cfg.TLS != nil {
		tc := tls.Server(c.raw, c.cfg.TLS)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil || tc.ConnectionState().NegotiatedProtocol != "h2" {
			return
		}
		c.mu.Lock()
		c.nc = tc
		c.mu.Unlock()
	}
	c.rec = recorder{r: c.nc, on: c.s.fallback != nil, limit: 2*int(min(c.cfg.MaxHeaderListSize, 1<<24)) + 1<<16}
	c.br = bufio.NewReaderSize(&c.rec, 16<<10)
	c.mu.Lock()
	c.bw = bufio.NewWriterSize(deadlineWriter{c.nc, c.cfg.WriteTimeout}, 32<<10)
	c.mu.Unlock()

	var preface [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(c.br, preface[:]); err != nil || string(preface[:]) != http2.ClientPreface {
		return
	}
	// An empty SETTINGS, which a grpc-go client waits for before its first
	// call, and which grpc-go's server lets the client ACK unasked.
	c.mu.Lock()
	c.writeFrameHeader(0, frameSettings, 0, 0)
	c.flushLocked()
	c.mu.Unlock()

	c.fr = http2.NewFramer(io.Discard, c.br)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = c.cfg.MaxHeaderListSize
	c.fr.SetReuseFrames()

	f, err := c.fr.ReadFrame()
	sf, ok := f.(*http2.SettingsFrame)
	if err != nil || !ok || sf.IsAck() {
		return
	}
	first, hand := c.decide(sf)
	if hand {
		handedOff = true
		c.handOff()
		return
	}
	if first == nil {
		return
	}
	_ = c.raw.SetDeadline(time.Time{})
	c.rec.on, c.rec.buf = false, nil
	c.startFast(first)
	c.readLoop()
}

// early is what a client sent before its first call, answered once the
// connection is served here.
type early struct {
	settingsAcks int
	pings        [][8]byte
}

// decide reads frames up to the first call's HEADERS and returns them,
// or reports that the connection goes to the fallback (hand), or neither
// (close).
func (c *conn) decide(sf *http2.SettingsFrame) (*http2.MetaHeadersFrame, bool) {
	var e early
	c.mu.Lock()
	err := c.applySettings(sf)
	c.mu.Unlock()
	if err != nil {
		return nil, c.s.fallback != nil
	}
	e.settingsAcks++
	_ = c.raw.SetReadDeadline(time.Now().Add(c.cfg.HandshakeTimeout))
	fallback := c.s.fallback != nil
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var ne net.Error
			switch {
			case errors.Is(err, errRecordFull), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
				return nil, false
			case errors.As(err, &ne) && ne.Timeout():
				return nil, fallback // idle after its handshake: grpc-go's keepalive looks after it
			case errors.As(err, new(http2.ConnectionError)), errors.As(err, new(http2.StreamError)):
				return nil, fallback // grpc-go answers the same bytes its way
			}
			return nil, false
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			c.mu.Lock()
			err := c.applySettings(f)
			c.mu.Unlock()
			if e.settingsAcks++; err != nil || e.settingsAcks > maxEarlyControl {
				return nil, fallback
			}
		case *http2.PingFrame:
			if f.IsAck() {
				continue
			}
			if e.pings = append(e.pings, f.Data); len(e.pings) > maxEarlyControl {
				return nil, fallback
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID != 0 || c.connSend+int64(f.Increment) > maxWindow {
				return nil, fallback
			}
			c.connSend += int64(f.Increment)
		case *http2.PriorityFrame:
		case *http2.MetaHeadersFrame:
			if f.Truncated || c.cfg.Handlers[f.PseudoValue("path")] == nil || compressed(f.Fields) {
				return nil, fallback // a compressed call: grpc-go may have the compressor
			}
			c.mu.Lock()
			c.fast = true
			c.early = e
			c.mu.Unlock()
			return f, false
		default:
			return nil, fallback
		}
	}
}

// handOff gives the connection, its bytes read so far replayed, to the
// fallback.
func (c *conn) handOff() {
	_ = c.raw.SetDeadline(time.Time{})
	replay := c.rec.buf
	c.rec.on, c.rec.buf = false, nil
	c.s.handOff(&replayConn{Conn: c.nc, pending: replay})
}

// startFast answers what the client sent before its first call, sends
// the server's settings, and reads the first call.
func (c *conn) startFast(first *http2.MetaHeadersFrame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	settings := [][2]uint32{
		{uint32(http2.SettingMaxConcurrentStreams), c.cfg.MaxConcurrentStreams},
		{uint32(http2.SettingMaxHeaderListSize), c.cfg.MaxHeaderListSize},
	}
	b := appendFrameHeader(nil, 6*len(settings), frameSettings, 0, 0)
	for _, s := range settings {
		b = append(b, byte(s[0]>>8), byte(s[0]), byte(s[1]>>24), byte(s[1]>>16), byte(s[1]>>8), byte(s[1]))
	}
	c.bw.Write(b)
	for range c.early.settingsAcks {
		c.writeFrameHeader(0, frameSettings, flagAck, 0)
	}
	for _, p := range c.early.pings {
		c.writeFrameHeader(8, framePing, flagAck, 0)
		c.bw.Write(p[:])
	}
	c.early = early{}
	c.writeWindowUpdate(0, connWindow-initialWindow)
	c.connRecv = connWindow
	c.kaTimer = time.AfterFunc(c.cfg.KeepaliveTime, c.keepalive)
	if age := c.cfg.MaxConnectionAge; age > 0 {
		age += time.Duration(rand.Int64N(int64(age/5)+1)) - age/10 // ±10%, as grpc-go
		c.ageTimer = time.AfterFunc(age, func() {
			c.shutdown()
			if grace := c.cfg.MaxConnectionAgeGrace; grace > 0 {
				time.AfterFunc(grace, c.close)
			}
		})
	}
	c.onHeaders(first.StreamID, first.StreamEnded(), first.Truncated, first.Fields)
	// From here the reader decodes header blocks itself, with the same
	// decoder and bounds as the Framer's ReadMetaHeaders but no allocation
	// a block (readHeaders).
	c.hdec = c.fr.ReadMetaHeaders
	c.fr.ReadMetaHeaders = nil
	c.hdec.SetEmitFunc(c.emit)
	c.hdec.SetMaxStringLength(int(min(c.cfg.MaxHeaderListSize, 1<<30)))
}

// readLoop reads and handles frames until the connection ends.
func (c *conn) readLoop() {
	for {
		// About to block on a read: flush the reader's own frames. PING
		// ACKs alone wait for a pending call's answer to go with it.
		if c.br.Buffered() == 0 {
			c.mu.Lock()
			if c.pending == 0 || c.urgent {
				c.flushLocked()
			}
			c.mu.Unlock()
		}
		f, err := c.fr.ReadFrame()
		c.activity.Store(true)
		c.mu.Lock()
		ok := !c.closed
		if ok && err != nil {
			ok = c.readError(err)
		} else if ok {
			ok = c.frame(f)
		}
		c.mu.Unlock()
		if !ok {
			return
		}
	}
}

// readError answers a frame the framer refused; false ends the
// connection.
func (c *conn) readError(err error) bool {
	var se http2.StreamError
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &se):
		if se.StreamID > c.lastID && se.StreamID%2 == 1 {
			c.lastID = se.StreamID
		}
		if st := c.streams[se.StreamID]; st != nil {
			c.resetStream(st, se.Code)
		} else {
			c.writeRST(se.StreamID, se.Code)
		}
		return c.countJunk()
	case errors.As(err, &ce):
		return c.connError(http2.ErrCode(ce), "")
	}
	return false // the connection's own error, or EOF
}

// frame handles one frame; false ends the connection.
func (c *conn) frame(f http2.Frame) bool {
	switch f := f.(type) {
	case *http2.HeadersFrame:
		return c.readHeaders(f.StreamID, f.HeaderBlockFragment(), true, f.HeadersEnded(), f.StreamEnded())
	case *http2.ContinuationFrame:
		return c.readHeaders(f.StreamID, f.HeaderBlockFragment(), false, f.HeadersEnded(), false)
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.RSTStreamFrame:
		if f.StreamID > c.lastID {
			return c.connError(http2.ErrCodeProtocol, "RST_STREAM on an idle stream")
		}
		if st := c.streams[f.StreamID]; st != nil {
			c.remove(st)
			st.cancel(context.Canceled)
		}
		return c.countJunk()
	case *http2.SettingsFrame:
		if f.IsAck() {
			return true
		}
		if err := c.applySettings(f); err != nil {
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				return c.connError(http2.ErrCode(ce), err.Error())
			}
			return c.connError(http2.ErrCodeProtocol, err.Error())
		}
		c.writeFrameHeader(0, frameSettings, flagAck, 0)
		c.drainBlocked()
		return c.countJunk()
	case *http2.PingFrame:
		return c.onPing(f)
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.GoAwayFrame:
		return true
	case *http2.PushPromiseFrame:
		return c.connError(http2.ErrCodeProtocol, "PUSH_PROMISE from a client")
	}
	return c.countJunk() // PRIORITY, unknown types
}

// countJunk counts a frame that leads to no answer.
func (c *conn) countJunk() bool {
	if c.junk++; c.junk > junkLimit {
		return c.connError(http2.ErrCodeEnhanceYourCalm, "too many frames without a call answered")
	}
	return true
}

// applySettings applies a client's SETTINGS.
func (c *conn) applySettings(f *http2.SettingsFrame) error {
	return f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - c.peerInitialWindow
			for _, st := range c.streams {
				if st.sendWindow+delta > maxWindow {
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
				st.sendWindow += delta
			}
			c.peerInitialWindow = int64(s.Val)
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = int(s.Val)
		}
		// HEADER_TABLE_SIZE: the server keeps no dynamic table, so every
		// size is honoured; the others do not bind a server.
		return nil
	})
}

// onPing acks a ping, enforcing the keepalive policy as grpc-go does.
func (c *conn) onPing(f *http2.PingFrame) bool {
	if f.IsAck() {
		c.pingOutstanding = false
		return true
	}
	b := appendFrameHeader(c.scratch[:0], 8, framePing, flagAck, 0)
	c.scratch = append(b, f.Data[:]...)
	c.bw.Write(c.scratch)
	c.dirty = true
	now := time.Now()
	defer func() { c.lastPingAt = now }()
	if c.resetPingStrikes {
		c.resetPingStrikes, c.pingStrikes = false, 0
		return true
	}
	min := c.cfg.KeepaliveMinTime
	if len(c.streams) == 0 && !c.cfg.PermitWithoutStream {
		min = 2 * time.Hour
	}
	if c.lastPingAt.Add(min).After(now) {
		c.pingStrikes++
	}
	if c.pingStrikes > maxPingStrikes {
		return c.connErrorData(http2.ErrCodeEnhanceYourCalm, "too_many_pings")
	}
	return true
}

// onWindowUpdate raises a send window and writes what waited for it.
func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) bool {
	inc := int64(f.Increment)
	if f.StreamID == 0 {
		if c.connSend+inc > maxWindow {
			return c.connError(http2.ErrCodeFlowControl, "connection window past 2^31-1")
		}
		c.connSend += inc
		c.drainBlocked()
		return true
	}
	st := c.streams[f.StreamID]
	if st == nil {
		if f.StreamID > c.lastID {
			return c.connError(http2.ErrCodeProtocol, "WINDOW_UPDATE on an idle stream")
		}
		return c.countJunk()
	}
	if st.sendWindow+inc > maxWindow {
		c.resetStream(st, http2.ErrCodeFlowControl)
		return true
	}
	st.sendWindow += inc
	c.drainBlocked()
	return true
}

// onHeaders starts a call, or refuses it as grpc-go would.
func (c *conn) onHeaders(id uint32, endStream, truncated bool, fields []hpack.HeaderField) bool {
	if st := c.streams[id]; st != nil { // trailers from the client
		switch {
		case !st.ended && endStream && st.px != nil:
			c.proxyData(st, nil, true)
		case !st.ended && endStream:
			c.endStream(st)
		default:
			c.resetStream(st, http2.ErrCodeProtocol)
		}
		return true
	}
	if id%2 == 1 && id <= c.lastID && c.wasReset(id) {
		return c.countJunk() // trailers sent before the client read our RST_STREAM
	}
	if id%2 == 0 || id <= c.lastID {
		return c.connError(http2.ErrCodeProtocol, fmt.Sprintf("received an illegal stream id: %d", id))
	}
	c.lastID = id
	rst := !endStream
	switch {
	case c.goingAway:
		c.writeRST(id, http2.ErrCodeRefusedStream)
		return true
	case truncated:
		c.writeRST(id, http2.ErrCodeFrameSize)
		return c.countJunk()
	}
	var method, path, ct, enc, timeout string
	var authorities, hosts int
	var grpcCT, connHeader, timeoutSet bool
	var sub string
	for _, hf := range fields {
		switch hf.Name {
		case "content-type":
			if s, ok := contentSubtype(hf.Value); ok {
				sub, grpcCT = s, true
			} else {
				ct = hf.Value
			}
		case "grpc-encoding":
			enc = hf.Value
		case ":method":
			method = hf.Value
		case ":path":
			path = hf.Value
		case ":authority":
			authorities++
		case "host":
			hosts++
		case "grpc-timeout":
			timeout, timeoutSet = hf.Value, true
		case "connection":
			connHeader = true
		}
	}
	var d time.Duration
	var timeoutErr error
	if timeoutSet {
		d, timeoutErr = decodeTimeout(timeout)
	}
	switch {
	case authorities > 1 || hosts > 1:
		c.earlyAbort(id, 400, sub, codes.Internal, fmt.Sprintf("num values of :authority: %v, num values of host: %v, both must only have 1 value as per HTTP/2 spec", authorities, hosts), rst)
	case connHeader:
		c.writeRST(id, http2.ErrCodeProtocol)
		return c.countJunk()
	case !grpcCT:
		c.earlyAbort(id, 415, sub, codes.InvalidArgument, fmt.Sprintf("invalid gRPC request content-type %q", ct), rst)
	case timeoutErr != nil:
		c.earlyAbort(id, 400, sub, codes.Internal, fmt.Sprintf("malformed grpc-timeout: %v", timeoutErr), rst)
	case authorities == 0 && hosts == 0:
		c.earlyAbort(id, 400, sub, codes.Internal, "no host or :authority header present", rst)
	case len(c.streams)+c.orphans >= int(c.cfg.MaxConcurrentStreams):
		c.writeRST(id, http2.ErrCodeRefusedStream)
		return c.countJunk()
	case method != "POST":
		c.earlyAbort(id, 405, sub, codes.Internal, fmt.Sprintf("Received a HEADERS frame with :method %q which should be POST", method), rst)
	case timeoutSet && d <= 0:
		c.earlyAbort(id, 200, sub, codes.DeadlineExceeded, context.DeadlineExceeded.Error(), rst)
	default:
		h := c.cfg.Handlers[path]
		identity := enc == "" || enc == "identity"
		switch {
		case h != nil && identity:
			c.startStream(id, endStream, h, path, sub, timeoutSet, d)
		case c.s.fallback != nil && (identity || encoding.GetCompressor(enc) != nil):
			c.startProxy(id, endStream, path, sub, enc, timeoutSet, d, fields)
		case h == nil:
			c.earlyAbort(id, 200, sub, codes.Unimplemented, unknownMethod(path), rst)
		default:
			c.earlyAbort(id, 200, sub, codes.Unimplemented, fmt.Sprintf("grpc: Decompressor is not installed for grpc-encoding %q", enc), rst)
		}
	}
	return true
}

// unknownMethod is the status message of a call this transport does not
// serve.
func unknownMethod(path string) string {
	sm := strings.TrimPrefix(path, "/")
	pos := strings.LastIndex(sm, "/")
	if pos == -1 {
		return fmt.Sprintf("malformed method name: %q", path)
	}
	return fmt.Sprintf("unknown method %s for service %s on this connection: its first call was served by the direct transport, which serves only its own methods; call %s on a new connection", sm[pos+1:], sm[:pos], path)
}

// startStream registers a call's stream.
func (c *conn) startStream(id uint32, endStream bool, h Handler, path, sub string, timeoutSet bool, d time.Duration) {
	st := c.newStream(id, h, path, sub, timeoutSet, d)
	if endStream {
		c.endStream(st)
	}
}

// newStream registers a stream, its deadline set.
func (c *conn) newStream(id uint32, h Handler, path, sub string, timeoutSet bool, d time.Duration) *stream {
	st := &stream{c: c, id: id, method: path, handler: h, subtype: sub,
		recvWindow: initialWindow, sendWindow: c.peerInitialWindow, msgLen: -1}
	if timeoutSet {
		st.deadline = time.Now().Add(d)
		st.mu.Lock()
		st.timer = time.AfterFunc(d, func() { c.expire(st) })
		st.mu.Unlock()
	}
	c.streams[st.id] = st
	return st
}

// expire ends a call past its grpc-timeout: grpc-go resets the stream
// with CANCEL and drops the handler's answer, and so does this.
func (c *conn) expire(st *stream) {
	c.mu.Lock()
	if !st.gone && !c.closed {
		c.resetStream(st, http2.ErrCodeCancel)
		c.flushLocked()
	}
	c.mu.Unlock()
	st.cancel(context.DeadlineExceeded)
}

// onData takes a request's bytes.
func (c *conn) onData(f *http2.DataFrame) bool {
	n := int64(f.Length)
	if n > c.connRecv {
		return c.connError(http2.ErrCodeFlowControl, "DATA past the connection's window")
	}
	c.connRecv -= n
	c.connUnacked += n
	if c.connUnacked >= connWindow/4 {
		c.writeWindowUpdate(0, uint32(c.connUnacked))
		c.connRecv += c.connUnacked
		c.connUnacked = 0
	}
	st := c.streams[f.StreamID]
	if st == nil {
		if f.StreamID > c.lastID {
			return c.connError(http2.ErrCodeProtocol, "DATA on an idle stream")
		}
		if c.wasReset(f.StreamID) {
			return true // sent before the client read our RST_STREAM
		}
		c.writeRST(f.StreamID, http2.ErrCodeStreamClosed)
		return c.countJunk()
	}
	if st.ended {
		c.resetStream(st, http2.ErrCodeStreamClosed)
		return c.countJunk()
	}
	if n > int64(st.recvWindow) {
		c.resetStream(st, http2.ErrCodeFlowControl)
		return c.countJunk()
	}
	st.recvWindow -= int32(n)
	st.unacked += int32(n)
	if st.px != nil {
		c.proxyData(st, f.Data(), f.StreamEnded())
		return true
	}
	if !c.takeData(st, f.Data()) {
		return true
	}
	if f.StreamEnded() {
		c.endStream(st)
	} else if st.unacked >= initialWindow/4 {
		c.writeWindowUpdate(st.id, uint32(st.unacked))
		st.recvWindow += st.unacked
		st.unacked = 0
	}
	return true
}

// takeData appends a request's bytes, checking its message's prefix as
// grpc-go does; false when the call was answered (refused) here.
func (c *conn) takeData(st *stream, data []byte) bool {
	if len(data) == 0 {
		return true
	}
	if st.req == nil {
		st.req = getBuf()
	}
	b := *st.req
	if st.msgLen < 0 {
		k := min(5-len(b), len(data))
		b, data = append(b, data[:k]...), data[k:]
		*st.req = b
		if len(b) < 5 {
			return true
		}
		length := int(uint32(b[1])<<24 | uint32(b[2])<<16 | uint32(b[3])<<8 | uint32(b[4]))
		switch {
		case length > c.cfg.MaxRecvMsgSize:
			c.abort(st, codes.ResourceExhausted, fmt.Sprintf("grpc: received message larger than max (%d vs. %d)", length, c.cfg.MaxRecvMsgSize))
			return false
		case b[0] == 1:
			c.abort(st, codes.Internal, "grpc: compressed flag set with identity or empty encoding")
			return false
		case b[0] > 1:
			c.abort(st, codes.Internal, fmt.Sprintf("grpc: received unexpected payload format %d", b[0]))
			return false
		}
		st.msgLen = length
		if 5+length > cap(b) { // the message's size at once, as grpc-go allocates it
			nb := getSized(5 + length)
			*nb = append(*nb, b...)
			putBuf(st.req)
			st.req, b = nb, *nb
		}
	}
	if len(b)+len(data) > 5+st.msgLen {
		c.abort(st, codes.Internal, "cardinality violation: received multiple request messages for non-client-streaming RPC")
		return false
	}
	*st.req = append(b, data...)
	return true
}

// endStream runs a call whose request is complete.
func (c *conn) endStream(st *stream) {
	st.ended = true
	switch {
	case st.req == nil || len(*st.req) == 0:
		c.abort(st, codes.Internal, "cardinality violation: received no request message from non-client-streaming RPC")
		return
	case len(*st.req) < 5+st.msgLen || st.msgLen < 0:
		c.abort(st, codes.Internal, io.ErrUnexpectedEOF.Error())
		return
	}
	st.started = true
	c.pending++
	c.s.dispatch(st)
}

// run runs a call's handler and writes its answer.
func (c *conn) run(st *stream) {
	out := getBuf()
	res, err := st.handler(st, st.method, (*st.req)[5:5+st.msgLen], (*out)[:0])
	putBuf(st.req)
	st.req = nil
	if cap(res) >= cap(*out) {
		*out = res[:0]
	}
	c.mu.Lock()
	c.pending--
	st.finished = true
	switch {
	case st.orphan:
		c.orphans--
		putBuf(out)
	case st.gone || c.closed:
		putBuf(out)
	case err != nil:
		c.remove(st)
		putBuf(out)
		c.writeStatus(st.id, st.subtype, statusOf(err), true)
	default:
		c.writeAnswer(st, res, out)
	}
	c.finished()
	c.mu.Unlock()
	st.cancel(context.Canceled)
}

// finished flushes after a call's answer: the last call pending on the
// connection flushes for all; one that finishes while others are pending
// lets them run first, and flushes if none did meanwhile, so that an
// answer never waits for a slow call.
func (c *conn) finished() {
	c.checkDrained()
	if c.pending == 0 {
		c.flushLocked()
		return
	}
	gen := c.flushes
	c.mu.Unlock()
	runtime.Gosched()
	c.mu.Lock()
	if c.flushes == gen {
		c.flushLocked()
	}
}

// statusOf is the status of a handler's error, as grpc-go reads it.
func statusOf(err error) *status.Status {
	if s, ok := status.FromError(err); ok {
		return s
	}
	return status.FromContextError(err)
}

// writeAnswer writes a call's answer: headers, message, trailers; what
// the windows do not let out waits for WINDOW_UPDATE.
func (c *conn) writeAnswer(st *stream, res []byte, out *[]byte) {
	c.writeHeaderBlock(st.id, c.answerHeaders(st.subtype), false)
	st.out, st.outMsg, st.outOff = out, res, 0
	st.prefix = grpcPrefix(len(res))
	c.junk = 0
	if c.writeData(st) {
		c.writeTrailers(st)
		return
	}
	c.blocked = append(c.blocked, st)
}

// writeData writes what the windows let out of a stream's answer and
// reports whether all of it went.
func (c *conn) writeData(st *stream) bool {
	total := 5 + len(st.outMsg)
	for st.outOff < total {
		n := int64(min(total-st.outOff, c.peerMaxFrame))
		n = min(n, c.connSend, st.sendWindow)
		if n <= 0 {
			return false
		}
		c.writeFrameHeader(int(n), frameData, 0, st.id)
		c.resetPingStrikes = true // each DATA frame written, as grpc-go's server counts them
		end := st.outOff + int(n)
		if st.outOff < 5 {
			c.bw.Write(st.prefix[st.outOff:min(5, end)])
		}
		if end > 5 {
			c.bw.Write(st.outMsg[max(st.outOff, 5)-5 : end-5])
		}
		st.outOff = end
		c.connSend -= n
		st.sendWindow -= n
	}
	return true
}

// writeTrailers ends a call answered OK.
func (c *conn) writeTrailers(st *stream) {
	b := appendStatusFields(c.hbuf[:0], 0, "", nil)
	c.hbuf = b
	c.writeHeaderBlock(st.id, b, true)
	c.remove(st)
}

// drainBlocked writes the answers that waited for window.
func (c *conn) drainBlocked() {
	if len(c.blocked) == 0 || c.connSend <= 0 {
		return
	}
	waiting := c.blocked
	c.blocked = nil
	for i, st := range waiting {
		if st.gone {
			continue
		}
		if c.connSend <= 0 {
			c.blocked = append(c.blocked, waiting[i:]...)
			break
		}
		if st.px != nil {
			st.px.blocked = false
			c.proxyWrite(st)
			continue
		}
		if c.writeData(st) {
			c.writeTrailers(st)
		} else {
			c.blocked = append(c.blocked, st)
		}
	}
	c.checkDrained()
}

// answerHeaders is the block of an answer's headers.
func (c *conn) answerHeaders(sub string) []byte {
	b := c.hbuf[:0]
	if !c.tableSized {
		b, c.tableSized = append(b, hpackTableSizeZero...), true
	}
	b = append(b, hpackStatus200...)
	b = appendLiteralIndexed(b, staticContentType, contentType(sub))
	c.hbuf = b
	return b
}

// writeStatus writes a status as a call's only headers (trailers-only),
// and resets the stream when the client may still be sending.
func (c *conn) writeStatus(id uint32, sub string, s *status.Status, ended bool) {
	c.writeEarly(id, 200, sub, s, !ended)
}

// earlyAbort refuses a call before its handler, as grpc-go's
// writeEarlyAbort does.
func (c *conn) earlyAbort(id uint32, httpStatus int, sub string, code codes.Code, msg string, rst bool) {
	c.writeEarly(id, httpStatus, sub, status.New(code, msg), rst)
}

func (c *conn) writeEarly(id uint32, httpStatus int, sub string, s *status.Status, rst bool) {
	b := c.hbuf[:0]
	if !c.tableSized {
		b, c.tableSized = append(b, hpackTableSizeZero...), true
	}
	if httpStatus == 200 {
		b = append(b, hpackStatus200...)
	} else {
		b = appendLiteralIndexed(b, staticStatus, fmt.Sprint(httpStatus))
	}
	b = appendLiteralIndexed(b, staticContentType, contentType(sub))
	var details []byte
	if p := s.Proto(); len(p.GetDetails()) > 0 {
		details, _ = proto.Marshal(p)
	}
	b = appendStatusFields(b, uint32(s.Code()), s.Message(), details)
	c.hbuf = b
	c.writeHeaderBlock(id, b, true)
	if rst {
		c.writeRST(id, http2.ErrCodeNo)
	}
}

// abort refuses a call whose request was found wanting: a status, and
// RST_STREAM if the client may still be sending.
func (c *conn) abort(st *stream, code codes.Code, msg string) {
	c.remove(st)
	c.writeEarly(st.id, 200, st.subtype, status.New(code, msg), !st.ended)
	st.cancel(context.Canceled)
}

// resetStream resets a stream and ends its call.
func (c *conn) resetStream(st *stream, code http2.ErrCode) {
	c.writeRST(st.id, code)
	c.remove(st)
	st.cancel(context.Canceled)
}

// remove takes a stream out of the connection.
func (c *conn) remove(st *stream) {
	if st.gone {
		return
	}
	st.gone = true
	delete(c.streams, st.id)
	if st.started && !st.finished {
		st.orphan = true
		c.orphans++
	}
	if !st.started {
		putBuf(st.req)
		st.req = nil
	}
	if st.out != nil {
		putBuf(st.out)
		st.out, st.outMsg = nil, nil
	}
	c.checkDrained()
}

// checkDrained closes the write side of a connection that sent GOAWAY
// once its last call is answered.
func (c *conn) checkDrained() {
	if !c.goingAway || c.draining || c.closed || len(c.streams) > 0 || c.pending > 0 {
		return
	}
	c.draining = true
	c.flushLocked()
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(drainTimeout))
}

// connError sends GOAWAY with code and ends the connection (false).
func (c *conn) connError(code http2.ErrCode, debug string) bool {
	return c.connErrorData(code, debug)
}

func (c *conn) connErrorData(code http2.ErrCode, debug string) bool {
	c.writeGoAway(code, debug)
	c.flushLocked()
	c.closeLocked()
	return false
}

// shutdown sends GOAWAY: the calls started go on, no other starts; the
// connection closes once they are answered. A connection not yet decided
// is closed.
func (c *conn) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if !c.fast {
		c.closeLocked()
		return
	}
	if !c.goingAway {
		c.goingAway = true
		c.writeGoAway(http2.ErrCodeNo, "")
		c.flushLocked()
	}
	c.checkDrained()
}

// keepalive pings a quiet connection, and closes one whose ping went
// unanswered.
func (c *conn) keepalive() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if c.activity.Swap(false) {
		c.pingOutstanding = false
		c.kaTimer.Reset(c.cfg.KeepaliveTime)
		return
	}
	if c.pingOutstanding {
		c.closeLocked()
		return
	}
	c.writeFrameHeader(8, framePing, 0, 0)
	c.bw.Write([]byte("unarykap"))
	c.flushLocked()
	c.pingOutstanding = true
	c.kaTimer.Reset(c.cfg.KeepaliveTimeout)
}

// close closes the connection at once.
func (c *conn) close() {
	c.mu.Lock()
	c.closeLocked()
	c.mu.Unlock()
}

func (c *conn) closeLocked() {
	if c.closed {
		return
	}
	c.closed = true
	_ = c.nc.Close()
	if c.kaTimer != nil {
		c.kaTimer.Stop()
	}
	if c.ageTimer != nil {
		c.ageTimer.Stop()
	}
	for _, st := range c.streams {
		c.remove(st)
		st.cancel(context.Canceled)
	}
	c.blocked = nil
}

// flushLocked writes what the writer holds; a failed write closes the
// connection.
func (c *conn) flushLocked() {
	if !c.dirty || c.closed {
		return
	}
	c.dirty, c.urgent = false, false
	c.flushes++
	if err := c.bw.Flush(); err != nil {
		c.closeLocked()
	}
}

// The frames the server writes, into the connection's writer.

func (c *conn) writeFrameHeader(length int, typ, flags byte, id uint32) {
	c.scratch = appendFrameHeader(c.scratch[:0], length, typ, flags, id)
	c.bw.Write(c.scratch)
	c.dirty, c.urgent = true, true
}

func (c *conn) writeRST(id uint32, code http2.ErrCode) {
	c.recentResets[c.nextReset%len(c.recentResets)] = id
	c.nextReset++
	c.writeFrame(frameRSTStream, 0, id, uint32(code))
}

// wasReset reports whether the server reset stream id lately.
func (c *conn) wasReset(id uint32) bool {
	for _, r := range c.recentResets {
		if r == id {
			return true
		}
	}
	return false
}

func (c *conn) writeWindowUpdate(id, inc uint32) {
	c.writeFrame(frameWindowUpdate, 0, id, inc&0x7fffffff)
}

func (c *conn) writeGoAway(code http2.ErrCode, debug string) {
	id := c.lastID & 0x7fffffff
	b := appendFrameHeader(c.scratch[:0], 8+len(debug), frameGoAway, 0, 0)
	b = append(b, byte(id>>24), byte(id>>16), byte(id>>8), byte(id), byte(code>>24), byte(code>>16), byte(code>>8), byte(code))
	c.scratch = append(b, debug...)
	c.bw.Write(c.scratch)
	c.dirty, c.urgent = true, true
}

// writeFrame writes a frame whose payload is 32-bit words.
func (c *conn) writeFrame(typ, flags byte, id uint32, words ...uint32) {
	b := appendFrameHeader(c.scratch[:0], 4*len(words), typ, flags, id)
	for _, w := range words {
		b = append(b, byte(w>>24), byte(w>>16), byte(w>>8), byte(w))
	}
	c.scratch = b
	c.bw.Write(b)
	c.dirty, c.urgent = true, true
}

// writeHeaderBlock writes a header block as HEADERS and, past the
// client's frame size, CONTINUATION frames.
func (c *conn) writeHeaderBlock(id uint32, block []byte, endStream bool) {
	flags := byte(0)
	if endStream {
		flags = flagEndStream
	}
	typ := frameHeaders
	for {
		n := min(len(block), c.peerMaxFrame)
		f := flags
		if n == len(block) {
			f |= flagEndHeaders
		}
		c.writeFrameHeader(n, typ, f, id)
		c.resetPingStrikes = true // headers written, as grpc-go's server counts them
		c.bw.Write(block[:n])
		block = block[n:]
		if len(block) == 0 {
			return
		}
		typ, flags = frameContinuation, 0
	}
}

// headerBlock is a header block being read: its stream, and what its
// decoding found so far.
type headerBlock struct {
	id         uint32
	endStream  bool
	fields     []hpack.HeaderField
	remain     uint32 // of the header list bound
	truncated  bool   // past the bound: the rest not kept
	invalid    bool   // a field HTTP/2 does not allow
	sawRegular bool
}

// readHeaders decodes a HEADERS or CONTINUATION frame's fragment (the
// Framer has checked that CONTINUATIONs follow their HEADERS), and starts
// the call once the block ends. It applies the Framer's ReadMetaHeaders
// rules: the header list bound (past it, REFUSED as grpc-go does with
// FRAME_SIZE), a fragment more than twice the bound's remainder or any
// CONTINUATION after an invalid field closes the connection
// (PROTOCOL_ERROR, the CONTINUATION flood), an HPACK error is
// COMPRESSION_ERROR, an invalid field or pseudo-header resets the stream
// (PROTOCOL_ERROR).
func (c *conn) readHeaders(id uint32, frag []byte, first, ended, endStream bool) bool {
	h := &c.hdr
	if first {
		*h = headerBlock{id: id, endStream: endStream, fields: h.fields[:0], remain: c.cfg.MaxHeaderListSize}
		c.hdec.SetEmitEnabled(true)
	}
	if int64(len(frag)) > 2*int64(h.remain) || (!first && h.invalid) {
		return c.connError(http2.ErrCodeProtocol, "header list too large")
	}
	if _, err := c.hdec.Write(frag); err != nil {
		return c.connError(http2.ErrCodeCompression, "")
	}
	if !ended {
		return true
	}
	if err := c.hdec.Close(); err != nil {
		return c.connError(http2.ErrCodeCompression, "")
	}
	if h.invalid || !validPseudos(h.fields) {
		if id > c.lastID {
			c.lastID = id
		}
		c.writeRST(id, http2.ErrCodeProtocol)
		return c.countJunk()
	}
	return c.onHeaders(id, h.endStream, h.truncated, h.fields)
}

// emit takes a decoded field, as the Framer's ReadMetaHeaders does.
func (c *conn) emit(hf hpack.HeaderField) {
	h := &c.hdr
	if !httpguts.ValidHeaderFieldValue(hf.Value) {
		h.invalid = true
	} else if strings.HasPrefix(hf.Name, ":") {
		h.invalid = h.sawRegular
	} else {
		h.sawRegular = true
		h.invalid = !validFieldName(hf.Name)
	}
	if h.invalid {
		c.hdec.SetEmitEnabled(false)
		return
	}
	if size := hf.Size(); size > h.remain {
		c.hdec.SetEmitEnabled(false)
		h.truncated, h.remain = true, 0
		return
	} else {
		h.remain -= size
	}
	h.fields = append(h.fields, hf)
}

// validFieldName reports whether a field's name is a token, lower case.
func validFieldName(v string) bool {
	if v == "" {
		return false
	}
	for _, r := range v {
		if !httpguts.IsTokenRune(r) || ('A' <= r && r <= 'Z') {
			return false
		}
	}
	return true
}

// validPseudos reports whether a request's pseudo-headers are known and
// not repeated.
func validPseudos(fields []hpack.HeaderField) bool {
	var seen [5]bool
	for _, hf := range fields {
		if !strings.HasPrefix(hf.Name, ":") {
			break
		}
		i := -1
		switch hf.Name {
		case ":method":
			i = 0
		case ":path":
			i = 1
		case ":scheme":
			i = 2
		case ":authority":
			i = 3
		case ":protocol":
			i = 4
		}
		if i < 0 || seen[i] {
			return false
		}
		seen[i] = true
	}
	return true
}

// compressed reports whether a call's message is compressed.
func compressed(fields []hpack.HeaderField) bool {
	for _, hf := range fields {
		if hf.Name == "grpc-encoding" && hf.Value != "" && hf.Value != "identity" {
			return true
		}
	}
	return false
}
