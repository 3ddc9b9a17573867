package unary_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"

	"github.com/actorlimit/actorlimit/service/unary"
)

// rawClient speaks HTTP/2 frame by frame, as an attacker would.
type rawClient struct {
	t    testing.TB
	nc   net.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
}

// dialRaw connects, sends the preface and settings, and reads the
// server's first SETTINGS.
func dialRaw(t testing.TB, addr string, settings ...http2.Setting) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = nc.Close() })
	r := &rawClient{t: t, nc: nc, fr: http2.NewFramer(nc, nc)}
	r.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	r.enc = hpack.NewEncoder(&r.hbuf)
	_, err = io.WriteString(nc, http2.ClientPreface)
	require.NoError(t, err)
	require.NoError(t, r.fr.WriteSettings(settings...))
	f := r.read()
	sf, ok := f.(*http2.SettingsFrame)
	require.True(t, ok && !sf.IsAck(), "the server's first frame: %v", f)
	return r
}

// read reads a frame, failing the test after 5 s.
func (r *rawClient) read() http2.Frame {
	r.t.Helper()
	f, err := r.readErr()
	require.NoError(r.t, err)
	return f
}

func (r *rawClient) readErr() (http2.Frame, error) {
	_ = r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	return r.fr.ReadFrame()
}

// headerBlock encodes a call's headers for path.
func (r *rawClient) headerBlock(path string, extra ...string) []byte {
	r.hbuf.Reset()
	fields := []string{":method", "POST", ":scheme", "http", ":path", path, ":authority", "x", "content-type", "application/grpc", "te", "trailers"}
	fields = append(fields, extra...)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = r.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return append([]byte(nil), r.hbuf.Bytes()...)
}

// headers opens stream id for path.
func (r *rawClient) headers(id uint32, path string, endStream bool) {
	r.t.Helper()
	require.NoError(r.t, r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.headerBlock(path), EndHeaders: true, EndStream: endStream}))
}

// call sends a whole call of msg on stream id.
func (r *rawClient) call(id uint32, path string, msg []byte) {
	r.t.Helper()
	r.headers(id, path, false)
	require.NoError(r.t, r.fr.WriteData(id, true, framed(msg)))
}

// framed is msg with its gRPC prefix.
func framed(msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// echoMsg is a request echo answers.
func echoMsg(domain, v string) []byte {
	b, _ := proto.Marshal(request(domain, v))
	return b
}

// answer reads frames until stream id's trailers and returns its
// grpc-status and whether DATA came.
func (r *rawClient) answer(id uint32) (string, bool) {
	r.t.Helper()
	data, code := false, ""
	for {
		f := r.read()
		switch f := f.(type) {
		case *http2.DataFrame:
			data = data || f.StreamID == id
		case *http2.MetaHeadersFrame:
			if f.StreamID != id {
				continue
			}
			if s := f.PseudoValue("status"); s != "" {
				code = s
			}
			if f.StreamEnded() {
				return code + " " + fieldValue(f, "grpc-status"), data
			}
		case *http2.GoAwayFrame:
			r.t.Fatalf("GOAWAY %v waiting for stream %d", f.ErrCode, id)
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				r.t.Fatalf("RST_STREAM %v on stream %d", f.ErrCode, id)
			}
		}
	}
}

func fieldValue(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.Fields {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}

// goAway reads frames until GOAWAY or the connection's end, and returns
// GOAWAY's code, or ^0 if the connection ended without one, or ^1 if
// neither came within 5 s. It may run on a goroutine of its own.
func (r *rawClient) goAway() http2.ErrCode {
	for {
		f, err := r.readErr()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return ^http2.ErrCode(1)
			}
			return ^http2.ErrCode(0)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			return g.ErrCode
		}
	}
}

// TestHostileFrames: raw frames a client should not send are answered as
// HTTP/2 says, the server neither panics nor hangs, and every goroutine it
// started ends.
func TestHostileFrames(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, s *served)
	}{
		{"bad preface", func(t *testing.T, s *served) {
			nc, err := net.Dial("tcp", s.addr)
			require.NoError(t, err)
			defer nc.Close()
			_, _ = io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = io.ReadAll(nc)
			assert.NoError(t, err, "closed, not left open")
		}},
		{"CONTINUATION flood past the header bound", func(t *testing.T, s *served) {
			r := dialRaw(t, s.addr)
			r.call(1, rlsMethod, echoMsg("d", "v"))
			assert.Equal(t, "200 0", first(r.answer(1)))
			require.NoError(t, r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: r.headerBlock(rlsMethod)}))
			// A literal field whose value runs through every CONTINUATION.
			junk := append([]byte{0x00, 0x01, 'x', 0x7f, 0xff, 0xff, 0xff, 0x0f}, bytes.Repeat([]byte{'a'}, 8<<10)...)
			var err error
			for i := 0; i < 1000 && err == nil; i++ {
				err = r.fr.WriteContinuation(3, false, junk)
				junk = junk[:8<<10]
				for k := range junk {
					junk[k] = 'a'
				}
			}
			code := r.goAway()
			assert.Contains(t, []http2.ErrCode{http2.ErrCodeProtocol, http2.ErrCodeCompression}, code, "%v", code)
		}},
		{"rapid reset", func(t *testing.T, s *served) {
			r := dialRaw(t, s.addr)
			r.call(1, rlsMethod, echoMsg("d", "v"))
			assert.Equal(t, "200 0", first(r.answer(1)))
			done := make(chan http2.ErrCode)
			go func() { done <- r.goAway() }()
			msg := framed(echoMsg("sleep", "v"))
			var err error
			for id := uint32(3); id < 3+2*20000 && err == nil; id += 2 {
				if err = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.headerBlock(rlsMethod), EndHeaders: true}); err == nil {
					if err = r.fr.WriteData(id, true, msg); err == nil {
						err = r.fr.WriteRSTStream(id, http2.ErrCodeCancel)
					}
				}
			}
			assert.Equal(t, http2.ErrCodeEnhanceYourCalm, <-done)
		}},
		{"SETTINGS flood", func(t *testing.T, s *served) {
			r := dialRaw(t, s.addr)
			r.call(1, rlsMethod, echoMsg("d", "v"))
			assert.Equal(t, "200 0", first(r.answer(1)))
			done := make(chan http2.ErrCode)
			go func() { done <- r.goAway() }()
			var err error
			for i := 0; i < 100000 && err == nil; i++ {
				err = r.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0})
			}
			assert.Equal(t, http2.ErrCodeEnhanceYourCalm, <-done)
		}},
		{"PING flood", func(t *testing.T, s *served) {
			r := dialRaw(t, s.addr)
			r.call(1, rlsMethod, echoMsg("d", "v"))
			assert.Equal(t, "200 0", first(r.answer(1)))
			done := make(chan http2.ErrCode)
			go func() { done <- r.goAway() }()
			var err error
			for i := 0; i < 100 && err == nil; i++ {
				err = r.fr.WritePing(false, [8]byte{byte(i)})
			}
			assert.Equal(t, http2.ErrCodeEnhanceYourCalm, <-done)
		}},
		{"WINDOW_UPDATE past 2^31-1", func(t *testing.T, s *served) {
			r := dialRaw(t, s.addr)
			r.call(1, rlsMethod, echoMsg("d", "v"))
			assert.Equal(t, "200 0", first(r.answer(1)))
			require.NoError(t, r.fr.WriteWindowUpdate(0, 1<<31-1))
			assert.Equal(t, http2.ErrCodeFlowControl, r.goAway())
		}},
		{"a window of 0: the answer waits for WINDOW_UPDATE", func(t *testing.T, s *served) {
			r := dialRaw(t, s.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
			r.call(1, rlsMethod, echoMsg("d", "v"))
			for {
				f := r.read()
				if h, ok := f.(*http2.MetaHeadersFrame); ok && h.StreamID == 1 {
					require.False(t, h.StreamEnded(), "trailers before the data")
					break
				}
				_, isData := f.(*http2.DataFrame)
				require.False(t, isData, "DATA past a window of 0")
			}
			// Nothing more comes until the window opens.
			_ = r.nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			for {
				f, err := r.fr.ReadFrame()
				if err != nil {
					break
				}
				_, isData := f.(*http2.DataFrame)
				require.False(t, isData, "DATA past a window of 0")
			}
			r.call(3, rlsMethod, echoMsg("d", "w")) // blocked too, behind
			require.NoError(t, r.fr.WriteWindowUpdate(1, 1<<20))
			require.NoError(t, r.fr.WriteWindowUpdate(3, 1<<20))
			code, data := r.answer(1)
			assert.Equal(t, " 0", code, "its headers read above")
			assert.True(t, data)
			code, data = r.answer(3)
			assert.Contains(t, []string{"200 0", " 0"}, code, "its headers maybe read while waiting for 1's")
			assert.True(t, data)
		}},
		{"DATA on a closed stream", func(t *testing.T, s *served) {
			r := dialRaw(t, s.addr)
			r.call(1, rlsMethod, echoMsg("d", "v"))
			assert.Equal(t, "200 0", first(r.answer(1)))
			require.NoError(t, r.fr.WriteData(1, true, framed(echoMsg("d", "v"))))
			for {
				f := r.read()
				if rst, ok := f.(*http2.RSTStreamFrame); ok {
					assert.Equal(t, http2.ErrCodeStreamClosed, rst.ErrCode)
					break
				}
			}
			r.call(3, rlsMethod, echoMsg("d", "v"))
			assert.Equal(t, "200 0", first(r.answer(3)), "the connection serves on")
		}},
		{"HEADERS on an even stream id", func(t *testing.T, s *served) {
			r := dialRaw(t, s.addr)
			r.call(1, rlsMethod, echoMsg("d", "v"))
			assert.Equal(t, "200 0", first(r.answer(1)))
			r.headers(4, rlsMethod, true)
			assert.Equal(t, http2.ErrCodeProtocol, r.goAway())
		}},
		{"a stream id going back", func(t *testing.T, s *served) {
			r := dialRaw(t, s.addr)
			r.call(5, rlsMethod, echoMsg("d", "v"))
			assert.Equal(t, "200 0", first(r.answer(5)))
			r.headers(3, rlsMethod, true)
			assert.Equal(t, http2.ErrCodeProtocol, r.goAway())
		}},
		{"streams past the bound are refused", func(t *testing.T, s *served) {
			r := dialRaw(t, s.addr)
			r.call(1, rlsMethod, echoMsg("d", "v"))
			assert.Equal(t, "200 0", first(r.answer(1)))
			for id := uint32(3); id < 3+2*4; id += 2 {
				r.call(id, rlsMethod, echoMsg("sleep", "v")) // held until reset
			}
			r.call(11, rlsMethod, echoMsg("d", "v"))
			for {
				if rst, ok := r.read().(*http2.RSTStreamFrame); ok {
					assert.Equal(t, uint32(11), rst.StreamID)
					assert.Equal(t, http2.ErrCodeRefusedStream, rst.ErrCode)
					break
				}
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := runtime.NumGoroutine()
			s := serve(t, unary.Config{MaxHeaderListSize: 16 << 10, MaxConcurrentStreams: 4})
			tc.run(t, s)
			s.stop(t, base+2) // the test's own readers
		})
	}
}

func first[A, B any](a A, _ B) A { return a }
