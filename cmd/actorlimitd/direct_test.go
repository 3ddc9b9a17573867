package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// TestDirectDifferential: with -grpc-transport direct, the same request
// bytes sent on a connection the direct transport serves and on one handed
// to grpc-go (its first call a health Watch, which only grpc-go serves) get
// the same answer bytes and the same status, and count the same in the
// metrics: valid requests, requests the scan refuses, undecodable ones,
// oversized ones, invalid UTF-8, unknown fields, an empty one.
func TestDirectDifferential(t *testing.T) {
	d := startWithConfig(t, serveConfig, "-grpc-transport", transportDirect, "-max-descriptors", "4")
	dialed := func() *grpc.ClientConn {
		cc, err := grpc.NewClient(d.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		t.Cleanup(func() { _ = cc.Close() })
		return cc
	}
	// A connection whose first call is a Watch goes to grpc-go, which
	// serves the Watch; on a connection the direct transport serves, it
	// proxies the Watch to grpc-go.
	stock := dialed()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	w, err := healthpb.NewHealthClient(stock).Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	first, err := w.Recv()
	require.NoError(t, err, "Watch on the connection handed to grpc-go")
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, first.GetStatus())
	direct := dialed()
	_, err = healthpb.NewHealthClient(direct).Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	w2, err := healthpb.NewHealthClient(direct).Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	second, err := w2.Recv()
	require.NoError(t, err, "Watch on a connection the direct transport serves, proxied")
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, second.GetStatus())

	valid := func(key string) func(i int) []byte {
		return func(i int) []byte {
			b, err := proto.Marshal(request("web", desc(key, fmt.Sprintf("v%d", i)), desc("open", "x"), desc("nomatch", "y")))
			require.NoError(t, err)
			return b
		}
	}
	fixed := func(b []byte) func(int) []byte { return func(int) []byte { return b } }
	entry := func(k, v []byte) []byte {
		e := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), k)
		return protowire.AppendBytes(protowire.AppendTag(e, 2, protowire.BytesType), v)
	}
	withDesc := func(entries ...[]byte) []byte {
		b := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("web"))
		var dsc []byte
		for _, e := range entries {
			dsc = protowire.AppendBytes(protowire.AppendTag(dsc, 1, protowire.BytesType), e)
		}
		return protowire.AppendBytes(protowire.AppendTag(b, 2, protowire.BytesType), dsc)
	}
	five := func(int) []byte {
		b, _ := proto.Marshal(request("web", desc("a", "1"), desc("b", "2"), desc("c", "3"), desc("d", "4"), desc("e", "5")))
		return b
	}
	unknownField := func(i int) []byte {
		return protowire.AppendVarint(protowire.AppendTag(valid("user")(i), 99, protowire.VarintType), 7)
	}
	cases := []struct {
		name string
		msg  func(i int) []byte
	}{
		{"valid, counted", valid("user")},
		{"valid, unlimited", valid("open")},
		{"over the descriptors bound", five},
		{"a huge value", func(i int) []byte {
			return withDesc(entry([]byte("user"), append(bytes.Repeat([]byte("v"), 1<<20), strconv.Itoa(i)...)))
		}},
		{"a length past the end", fixed([]byte{0x0a, 0x7f, 'w', 'e', 'b'})},
		{"an unknown wire type", fixed([]byte{0x0f, 0xff, 0xff, 0xff})},
		{"invalid UTF-8", fixed(withDesc(entry([]byte("user"), []byte("\xff\xfe"))))},
		{"unknown fields", unknownField},
		{"empty", fixed(nil)},
		{"5 MiB", fixed(bytes.Repeat([]byte{0x0a}, 5<<20))},
	}
	send := func(cc *grpc.ClientConn, msg []byte) ([]byte, *status.Status) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		var out []byte
		err := cc.Invoke(ctx, methodShouldRateLimit, &msg, &out, grpc.ForceCodecV2(rawCodec{}))
		return out, status.Convert(err)
	}
	run := func(cc *grpc.ClientConn, offset int) (answers [][]byte, statuses []string) {
		for i, tc := range cases {
			out, st := send(cc, tc.msg(offset+i))
			answers, statuses = append(answers, out), append(statuses, st.Proto().String())
		}
		return answers, statuses
	}
	// A counted rule's answer holds the time to its window's end, in
	// seconds: a pair is tried again when it straddled a second.
	var gAnswers, dAnswers [][]byte
	var gStatuses, dStatuses []string
	var gCounts, dCounts map[string]float64
	for try := range 3 {
		c0 := counters(t, d)
		gAnswers, gStatuses = run(stock, 1000*try)
		c1 := counters(t, d)
		dAnswers, dStatuses = run(direct, 1000*try+500)
		c2 := counters(t, d)
		gCounts, dCounts = delta(c0, c1), delta(c1, c2)
		if fmt.Sprint(gAnswers) == fmt.Sprint(dAnswers) {
			break
		}
	}
	for i, tc := range cases {
		assert.Equal(t, gStatuses[i], dStatuses[i], "%s: status", tc.name)
		assert.Equal(t, gAnswers[i], dAnswers[i], "%s: answer bytes", tc.name)
	}
	assert.Contains(t, gStatuses[2], "code:3 ", "the scan's refusal: InvalidArgument")
	assert.Contains(t, gStatuses[9], "code:8 ", "ResourceExhausted")
	assert.Equal(t, gCounts, dCounts, "the metrics counted by each path")
	assert.Positive(t, gCounts[`actorlimitd_refused_total{reason="descriptors"}`])
}

// delta is b's counters less a's, those that moved, the request duration
// histogram's count left out.
func delta(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for name, v := range b {
		if d := v - a[name]; d != 0 && !strings.Contains(name, "duration") {
			out[name] = d
		}
	}
	return out
}

// counters reads d's actorlimitd_* counters from /metrics.
func counters(t *testing.T, d *daemon) map[string]float64 {
	t.Helper()
	code, body := d.getDebug("/metrics")
	require.Equal(t, 200, code)
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "actorlimitd_") || strings.Contains(line, "_bucket") || strings.Contains(line, "_sum") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	}
	return out
}

var _ = ratelimitv3.RateLimitDescriptor{}
var _ = rlsv3.RateLimitRequest{}
