package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestWireBadMessages: over a real gRPC connection, bytes that are not a
// RateLimitRequest and a message past gRPC's 4 MiB bound are refused with
// an error (the latter ResourceExhausted), a descriptor whose entry has an
// empty key is answered without a rule, and the process goes on serving,
// with nothing of them counted.
func TestWireBadMessages(t *testing.T) { forTransports(t, testWireBadMessages) }

func testWireBadMessages(t *testing.T, transport string) {
	d := startWithConfig(t, serveConfig, "-grpc-transport", transport)
	d.client() // dials d.conn
	const method = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
	send := func(msg []byte) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var out []byte
		return d.conn.Invoke(ctx, method, &msg, &out, grpc.ForceCodecV2(rawCodec{}))
	}
	tests := []struct {
		name string
		msg  []byte
		want []codes.Code
	}{
		// A field 1 (domain) whose length runs past the message.
		{"a length past the end", []byte{0x0a, 0x7f, 'w', 'e', 'b'}, []codes.Code{codes.Internal, codes.InvalidArgument}},
		// Wire type 7 does not exist.
		{"an unknown wire type", []byte{0x0f, 0xff, 0xff, 0xff}, []codes.Code{codes.Internal, codes.InvalidArgument}},
		{"random bytes", bytes.Repeat([]byte{0xff, 0x00, 0x13, 0x37}, 64), []codes.Code{codes.Internal, codes.InvalidArgument}},
		{"empty", nil, []codes.Code{codes.InvalidArgument}}, // decodes as a request with no domain
		{"5 MiB", bytes.Repeat([]byte{0x0a}, 5<<20), []codes.Code{codes.ResourceExhausted}},
	}
	for _, tt := range tests {
		err := send(tt.msg)
		require.Error(t, err, tt.name)
		assert.Contains(t, tt.want, status.Code(err), "%s: %v", tt.name, err)
	}

	resp, err := d.ask(request("web", desc("", "x"), desc("", ""), desc("user", "wire")))
	require.NoError(t, err, "empty keys")
	require.Len(t, resp.Statuses, 3)
	for i, s := range resp.Statuses[:2] {
		assert.Nil(t, s.CurrentLimit, "descriptor %d: an empty key matches no rule", i)
		assert.Equal(t, rlsv3.RateLimitResponse_OK, s.Code, "descriptor %d", i)
	}
	_, got := codes3(resp)
	assert.Equal(t, "ok 2", got[2], "the process serves on, its counts whole")
}
