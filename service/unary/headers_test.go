package unary_test

import (
	"context"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/status"

	"github.com/actorlimit/actorlimit/service/unary"
)

// outcome reads frames until stream id ends and describes how: its
// :status, grpc-status and grpc-message, or the code of its RST_STREAM.
func (r *rawClient) outcome(id uint32) string {
	r.t.Helper()
	code := ""
	for {
		switch f := r.read().(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID != id {
				continue
			}
			if s := f.PseudoValue("status"); s != "" {
				code = s
			}
			if f.StreamEnded() {
				return code + " " + fieldValue(f, "grpc-status") + " " + fieldValue(f, "grpc-message")
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				return "RST_STREAM " + f.ErrCode.String()
			}
		case *http2.GoAwayFrame:
			return "GOAWAY " + f.ErrCode.String()
		}
	}
}

// TestHeaderChecksAsGRPCGo: a call's headers and message prefix are
// checked as grpc-go's server checks them, with its answers: the same
// request, raw, to grpc-go's server and to this transport gets the same
// :status, grpc-status and grpc-message, or the same RST_STREAM.
func TestHeaderChecksAsGRPCGo(t *testing.T) {
	s := serve(t, unary.Config{MaxRecvMsgSize: 1024})
	msg := echoMsg("d", "v")
	tests := []struct {
		name   string
		fields []string // replacing the defaults of the same name; a value "-" drops the field
		prefix []byte   // the message's prefix when set
		body   []byte
	}{
		{name: "valid"},
		{name: "GET", fields: []string{":method", "GET"}},
		{name: "no content-type", fields: []string{"content-type", "-"}},
		{name: "content-type json", fields: []string{"content-type", "application/json"}},
		{name: "content-type grpc+proto", fields: []string{"content-type", "application/grpc+proto"}},
		{name: "content-type grpc;charset", fields: []string{"content-type", "application/grpc;charset=utf-8"}},
		{name: "no authority", fields: []string{":authority", "-"}},
		{name: "host instead of authority", fields: []string{":authority", "-", "host", "x"}},
		{name: "connection header", fields: []string{"connection", "close"}},
		{name: "grpc-timeout bad unit", fields: []string{"grpc-timeout", "10x"}},
		{name: "grpc-timeout too long", fields: []string{"grpc-timeout", "1234567890S"}},
		{name: "grpc-timeout 0", fields: []string{"grpc-timeout", "0n"}},
		{name: "grpc-encoding gzip-ish", fields: []string{"grpc-encoding", "snappy"}},
		{name: "compressed flag", prefix: []byte{1, 0, 0, 0, byte(len(msg))}},
		{name: "payload format 7", prefix: []byte{7, 0, 0, 0, byte(len(msg))}},
		{name: "over the size bound", prefix: []byte{0, 0, 0, 8, 0}},
		{name: "two messages", body: append(framed(msg), framed(msg)...)},
		{name: "no message", body: []byte{}},
		{name: "a message cut short", body: framed(msg)[:8]},
		{name: "a pseudo-header after a regular one", fields: []string{":foo", "x"}},
		{name: "an upper-case name", fields: []string{"X-Up", "x"}},
		{name: "a value with NUL", fields: []string{"x-nul", "a\x00b"}},
		{name: "unknown method", fields: []string{":path", "/envoy.service.ratelimit.v3.RateLimitService/Other"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]string
			for i, addr := range []string{s.grpc, s.addr} {
				r := dialRaw(t, addr)
				if i == 1 { // decide the connection: the direct transport's
					r.call(1, rlsMethod, msg)
					require.True(t, strings.HasPrefix(r.outcome(1), "200 0"))
				}
				fields := map[string]string{}
				order := []string{":method", ":scheme", ":path", ":authority", "content-type", "te"}
				for k, v := range map[string]string{":method": "POST", ":scheme": "http", ":path": rlsMethod, ":authority": "x", "content-type": "application/grpc", "te": "trailers"} {
					fields[k] = v
				}
				for k := 0; k+1 < len(tc.fields); k += 2 {
					if _, ok := fields[tc.fields[k]]; !ok {
						order = append(order, tc.fields[k])
					}
					fields[tc.fields[k]] = tc.fields[k+1]
				}
				r.hbuf.Reset()
				for _, name := range order {
					if v := fields[name]; v != "-" {
						_ = r.enc.WriteField(hpack.HeaderField{Name: name, Value: v})
					}
				}
				id := uint32(3)
				require.NoError(t, r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.hbuf.Bytes(), EndHeaders: true}))
				body := framed(msg)
				if tc.prefix != nil {
					body = append(append([]byte(nil), tc.prefix...), msg...)
				}
				if tc.body != nil {
					body = tc.body
				}
				require.NoError(t, r.fr.WriteData(id, true, body))
				got[i] = r.outcome(id)
			}
			if tc.name == "unknown method" { // the direct transport's says more
				assert.True(t, strings.HasPrefix(got[1], got[0]), "grpc-go's %q, then the direct transport's %q", got[0], got[1])
				return
			}
			assert.Equal(t, got[0], got[1], "grpc-go's, then the direct transport's")
		})
	}
}

// TestRequestBounds: a message past MaxRecvMsgSize is refused as grpc-go
// refuses it, through grpc-go's client, and one within it is served.
func TestRequestBounds(t *testing.T) {
	s := serve(t, unary.Config{MaxRecvMsgSize: 1024})
	for _, n := range []int{900, 1100, 1 << 20} {
		var sts [2]string
		for i, addr := range []string{s.grpc, s.addr} {
			_, err := rlsv3.NewRateLimitServiceClient(dial(t, addr, nil)).ShouldRateLimit(context.Background(), request("d", strings.Repeat("v", n)))
			sts[i] = status.Convert(err).Proto().String()
		}
		assert.Equal(t, sts[0], sts[1], "a value of %d bytes", n)
	}
}
