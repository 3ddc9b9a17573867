package service

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// wireRequests are requests in the shapes Envoy sends and around them,
// each with whether decodeRequest decodes it itself (fast) or leaves it to
// proto.Unmarshal.
var wireRequests = []struct {
	name string
	wire func(t testing.TB) []byte
	fast bool
}{
	{"one descriptor", func(t testing.TB) []byte {
		return marshal(t, &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{descOf(entry("client", "c1"))}})
	}, true},
	{"three descriptors, hits_addend", func(t testing.TB) []byte {
		return marshal(t, &rlsv3.RateLimitRequest{Domain: "d", HitsAddend: 7, Descriptors: []*ratelimitv3.RateLimitDescriptor{
			descOf(entry("client", "c1")), descOf(entry("path", "/api/p")), descOf(entry("client", "c1"), entry("path", "/api/p"))}})
	}, true},
	{"many descriptors and entries", func(t testing.TB) []byte {
		req := &rlsv3.RateLimitRequest{Domain: "d"}
		for range 6 {
			req.Descriptors = append(req.Descriptors, descOf(entry("a", "1"), entry("b", ""), entry("", "3")))
		}
		return marshal(t, req)
	}, true},
	{"empty descriptor and entry", func(t testing.TB) []byte {
		return wireField(wireField(nil, requestDescriptors, nil), requestDescriptors, wireField(nil, descriptorEntries, nil))
	}, true},
	{"domain twice: the last", func(t testing.TB) []byte {
		return wireField(wireField(nil, requestDomain, []byte("a")), requestDomain, []byte("bb"))
	}, true},
	{"empty", func(t testing.TB) []byte { return nil }, true},
	{"limit override", func(t testing.TB) []byte {
		return marshal(t, &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry("k", "v")},
			Limit:   &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: 1}}}})
	}, false},
	{"descriptor's hits_addend", func(t testing.TB) []byte {
		return marshal(t, &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry("k", "v")}, HitsAddend: wrapperspb.UInt64(0)}}})
	}, false},
	{"unknown field", func(t testing.TB) []byte {
		return protowire.AppendVarint(tag(wireField(nil, requestDomain, []byte("d")), 9, protowire.VarintType), 1)
	}, false},
	{"value not UTF-8", func(t testing.TB) []byte {
		return wireField(nil, requestDescriptors, wireField(nil, descriptorEntries, wireField(nil, entryValue, []byte{0xff})))
	}, false},
	{"domain of the wrong wire type", func(t testing.TB) []byte {
		return protowire.AppendVarint(tag(nil, requestDomain, protowire.VarintType), 1)
	}, false},
	{"truncated", func(t testing.TB) []byte {
		w := marshal(t, &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{descOf(entry("client", "c1"))}})
		return w[:len(w)-1]
	}, false},
}

// checkDecode holds decodeRequest to proto.Unmarshal on wire: when it
// decodes, proto.Unmarshal decodes the same; when not, req is left empty.
// It returns whether decodeRequest decoded.
func checkDecode(t *testing.T, wire []byte) bool {
	t.Helper()
	got := new(rlsv3.RateLimitRequest)
	ok := decodeRequest(wire, got)
	want := new(rlsv3.RateLimitRequest)
	err := proto.Unmarshal(wire, want)
	if !ok {
		require.True(t, proto.Equal(got, new(rlsv3.RateLimitRequest)), "left %v", got)
		return false
	}
	require.NoError(t, err, "decodeRequest decoded what proto.Unmarshal refuses")
	require.True(t, proto.Equal(want, got), "decodeRequest: %v\nproto.Unmarshal: %v", got, want)
	return true
}

// TestDecodeRequest: the shapes Envoy sends are decoded by decodeRequest
// as proto.Unmarshal decodes them; the others are left to it.
func TestDecodeRequest(t *testing.T) {
	for _, tc := range wireRequests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.fast, checkDecode(t, tc.wire(t)))
		})
	}
}

// FuzzDecodeRequest: on any bytes, decodeRequest decodes what
// proto.Unmarshal decodes, or leaves the request to it.
func FuzzDecodeRequest(f *testing.F) {
	for _, tc := range wireRequests {
		f.Add(tc.wire(f))
	}
	f.Fuzz(func(t *testing.T, wire []byte) { checkDecode(t, wire) })
}

// checkEncode holds the codec's Marshal to proto.Marshal on m: the same
// bytes, which decode to m; and appendResponse's to responseSize's size
// when it handles m. It returns whether appendResponse handled m.
func checkEncode(t *testing.T, m *rlsv3.RateLimitResponse) bool {
	t.Helper()
	want, werr := proto.Marshal(m)
	data, err := new(Codec).withFallback().Marshal(m)
	if werr != nil {
		require.Error(t, err)
		return false
	}
	require.NoError(t, err)
	got := data.Materialize()
	data.Free()
	require.Equal(t, string(want), string(got), "the bytes differ from proto.Marshal's")
	back := new(rlsv3.RateLimitResponse)
	require.NoError(t, proto.Unmarshal(got, back))
	require.True(t, proto.Equal(m, back), "sent %v\nreceived %v", m, back)
	size, ok := responseSize(m)
	if ok {
		require.Len(t, appendResponse(nil, m), size)
	}
	return ok
}

// withFallback sets a Codec's fallback, for tests of Marshal without a
// Server.
func (c *Codec) withFallback() *Codec {
	*c = *NewCodec(nil)
	return c
}

func answer(code rlsv3.RateLimitResponse_Code, sts ...*rlsv3.RateLimitResponse_DescriptorStatus) *rlsv3.RateLimitResponse {
	return &rlsv3.RateLimitResponse{OverallCode: code, Statuses: sts}
}

// TestEncodeResponse: the answers the Server gives are encoded by
// appendResponse with proto.Marshal's bytes; the others are left to it.
func TestEncodeResponse(t *testing.T) {
	limit := &rlsv3.RateLimitResponse_RateLimit{Name: "per-client", RequestsPerUnit: 1000, Unit: rlsv3.RateLimitResponse_RateLimit_HOUR}
	st := func(code rlsv3.RateLimitResponse_Code, rem uint32, d *durationpb.Duration) *rlsv3.RateLimitResponse_DescriptorStatus {
		return &rlsv3.RateLimitResponse_DescriptorStatus{Code: code, CurrentLimit: limit, LimitRemaining: rem, DurationUntilReset: d}
	}
	withUnknown := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	withUnknown.ProtoReflect().SetUnknown(protowire.AppendVarint(tag(nil, 99, protowire.VarintType), 5))
	for _, tc := range []struct {
		name string
		m    *rlsv3.RateLimitResponse
		fast bool
	}{
		{"empty", &rlsv3.RateLimitResponse{}, true},
		{"one status", answer(rlsv3.RateLimitResponse_OK, st(rlsv3.RateLimitResponse_OK, 999, durationpb.New(1800*time.Second))), true},
		{"over, unlimited, no rule", answer(rlsv3.RateLimitResponse_OVER_LIMIT,
			st(rlsv3.RateLimitResponse_OVER_LIMIT, 0, durationpb.New(-1500*time.Millisecond)),
			&rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: 1<<32 - 1},
			&rlsv3.RateLimitResponse_DescriptorStatus{}), true},
		{"headers, raw body, unit multiplier", &rlsv3.RateLimitResponse{
			Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{UnitMultiplier: wrapperspb.UInt32(0)}},
				{CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{UnitMultiplier: wrapperspb.UInt32(300)}}},
			ResponseHeadersToAdd: []*corev3.HeaderValue{{Key: HeaderLimit, Value: "1000"}, {Key: "raw", RawValue: []byte{0, 0xff}}},
			RequestHeadersToAdd:  []*corev3.HeaderValue{{Key: "x", Value: "y"}, {}},
			RawBody:              []byte("body")}, true},
		{"a code out of the enum", answer(-3, &rlsv3.RateLimitResponse_DescriptorStatus{Code: 77}), true},
		{"dynamic metadata", &rlsv3.RateLimitResponse{DynamicMetadata: &structpb.Struct{}}, false},
		{"quota", &rlsv3.RateLimitResponse{Quota: &rlsv3.RateLimitResponse_Quota{}}, false},
		{"status quota", answer(rlsv3.RateLimitResponse_OK, &rlsv3.RateLimitResponse_DescriptorStatus{Quota: &rlsv3.RateLimitResponse_Quota{}}), false},
		{"unknown fields", answer(rlsv3.RateLimitResponse_OK, withUnknown), false},
		{"name not UTF-8", answer(rlsv3.RateLimitResponse_OK, &rlsv3.RateLimitResponse_DescriptorStatus{CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{Name: "\xff"}}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.fast, checkEncode(t, tc.m))
		})
	}
}

// FuzzEncodeResponse: answers built from any values encode as
// proto.Marshal encodes them.
func FuzzEncodeResponse(f *testing.F) {
	f.Add(int32(1), uint8(1), int32(1), "per-client", uint32(1000), int32(3), uint32(999), int64(1800), int32(0), "RateLimit-Limit", "1000", []byte(nil), uint8(0))
	f.Add(int32(2), uint8(3), int32(2), "", uint32(0), int32(-1), uint32(1<<32-1), int64(-5), int32(-999999999), "", "\xff", []byte("b"), uint8(0xff))
	f.Fuzz(func(t *testing.T, overall int32, n uint8, code int32, name string, rpu uint32, unit int32, rem uint32, sec int64, nanos int32, key, value string, raw []byte, flags uint8) {
		m := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_Code(overall), RawBody: raw}
		for i := range int(n % 6) {
			st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_Code(code + int32(i)), LimitRemaining: rem >> i}
			if flags&(1<<(i%4)) != 0 {
				st.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{Name: name, RequestsPerUnit: rpu, Unit: rlsv3.RateLimitResponse_RateLimit_Unit(unit)}
				if flags&0x10 != 0 {
					st.CurrentLimit.UnitMultiplier = wrapperspb.UInt32(rpu >> 3)
				}
			}
			if flags&0x20 != 0 || i%2 == 1 {
				st.DurationUntilReset = &durationpb.Duration{Seconds: sec, Nanos: nanos}
			}
			m.Statuses = append(m.Statuses, st)
		}
		if flags&0x40 != 0 {
			m.ResponseHeadersToAdd = []*corev3.HeaderValue{{Key: key, Value: value}, {Key: value, RawValue: raw}}
		}
		if flags&0x80 != 0 {
			m.RequestHeadersToAdd = []*corev3.HeaderValue{{Key: key}}
		}
		checkEncode(t, m)
	})
}
