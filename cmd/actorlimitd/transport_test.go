package main

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestGRPCWindow: what a client sees of -grpc-window-bytes on the wire.
// By default the server keeps HTTP/2's initial window (no SETTINGS entry
// for it) and, when a request's data arrives, hands the data's bytes back
// to the connection's window and PINGs the client (grpc-go's estimate of
// the bandwidth-delay product); with the flag, its SETTINGS carry the
// window, the connection's window is raised to it at the start, and no
// PING comes.
func TestGRPCWindow(t *testing.T) {
	tests := []struct {
		args       []string
		window     uint32 // the SETTINGS' initial window, 65535 when absent
		connUpdate uint32 // the connection's WINDOW_UPDATE at the start
		ping       bool
	}{
		// the 5 bytes of the request's data handed back before the PING
		{nil, 65535, 5, true},
		{[]string{"-grpc-window-bytes", "0"}, 65535, 5, true},
		{[]string{"-grpc-window-bytes", "65536"}, 65536, 1, false},
		{[]string{"-grpc-window-bytes", "1048576"}, 1 << 20, 1<<20 - 65535, false},
	}
	for _, tt := range tests {
		t.Run(strings.Join(append([]string{"args"}, tt.args...), " "), func(t *testing.T) {
			d := startWithConfig(t, serveConfig, tt.args...)
			got := healthCheckFrames(t, d.grpc)
			assert.Equal(t, tt.window, got.window, "SETTINGS_INITIAL_WINDOW_SIZE")
			assert.Equal(t, tt.connUpdate, got.connUpdate, "the connection's WINDOW_UPDATE before the answer")
			assert.Equal(t, tt.ping, got.ping, "a PING from the server (its window estimate)")
			assert.True(t, got.answered, "the health check was answered")
		})
	}
}

// wireSeen is what healthCheckFrames read from the server.
type wireSeen struct {
	window     uint32 // SETTINGS_INITIAL_WINDOW_SIZE, 65535 when absent
	connUpdate uint32 // WINDOW_UPDATE increments on the connection (stream 0)
	ping       bool   // a PING (not an ack) came
	answered   bool   // the call's stream ended
}

// healthCheckFrames sends one grpc.health.v1.Health/Check call to addr
// over a bare HTTP/2 connection and reads the server's frames until the
// call's stream ends (10 s at most).
func healthCheckFrames(t *testing.T, addr string) wireSeen {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(conn, http2.ClientPreface)
	require.NoError(t, err)
	fr := http2.NewFramer(conn, conn)
	require.NoError(t, fr.WriteSettings())
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", "/grpc.health.v1.Health/Check"},
		{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		require.NoError(t, enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}))
	}
	require.NoError(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}))
	// an empty HealthCheckRequest: not compressed, 0 bytes long
	require.NoError(t, fr.WriteData(1, true, []byte{0, 0, 0, 0, 0}))

	seen := wireSeen{window: 65535}
	for !seen.answered {
		f, err := fr.ReadFrame()
		require.NoError(t, err)
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
				seen.window = v
			}
			require.NoError(t, fr.WriteSettingsAck())
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				seen.connUpdate += f.Increment
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				seen.ping = true
				require.NoError(t, fr.WritePing(true, f.Data))
			}
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v: %s", f.ErrCode, f.DebugData())
		case *http2.RSTStreamFrame:
			t.Fatalf("RST_STREAM %v", f.ErrCode)
		}
		if f.Header().StreamID == 1 && f.Header().Flags.Has(http2.FlagHeadersEndStream) {
			seen.answered = true
		}
	}
	return seen
}

// TestTransportFlags: -grpc-window-bytes, its default, and the values
// refused with the flag named.
func TestTransportFlags(t *testing.T) {
	tests := []struct {
		args string
		want int
		err  string
	}{
		{"", 0, ""},
		{"-grpc-window-bytes 0", 0, ""},
		{"-grpc-window-bytes 65536", 65536, ""},
		{"-grpc-window-bytes 2147483647", 1<<31 - 1, ""},
		{"-grpc-window-bytes 65535", 0, "-grpc-window-bytes 65535: want 0 (estimated) or 65536 to 2147483647"},
		{"-grpc-window-bytes 2147483648", 0, "-grpc-window-bytes 2147483648"},
		{"-grpc-window-bytes -1", 0, "-grpc-window-bytes -1"},
		{"-grpc-transport direct", 0, ""},
		{"-grpc-transport grpc -grpc-window-bytes 65536", 65536, ""},
		{"-grpc-transport h3", 0, `-grpc-transport "h3": want grpc or direct`},
		{"-grpc-transport direct -grpc-window-bytes 65536", 0, "-grpc-window-bytes goes with -grpc-transport grpc"},
		{"-grpc-transport direct -tracing", 0, "use -grpc-transport grpc with -tracing"},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			f, err := parseFlags(append([]string{"-config", "x"}, strings.Fields(tt.args)...), io.Discard)
			if tt.err != "" {
				assert.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, f.listen.transport.windowBytes)
		})
	}
}
