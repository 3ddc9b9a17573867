package service

import (
	"bytes"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// scanBounds are small bounds for the scan's tests.
var scanBounds = Bounds{Descriptors: 3, Entries: 2, KeyLength: 8, ValueLength: 1 << 30}

func entry(k, v string) *ratelimitv3.RateLimitDescriptor_Entry {
	return &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v}
}

func descOf(entries ...*ratelimitv3.RateLimitDescriptor_Entry) *ratelimitv3.RateLimitDescriptor {
	return &ratelimitv3.RateLimitDescriptor{Entries: entries}
}

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}

// tag appends a field's tag.
func tag(b []byte, num protowire.Number, typ protowire.Type) []byte {
	return protowire.AppendTag(b, num, typ)
}

// field appends a length-delimited field.
func wireField(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(tag(b, num, protowire.BytesType), v)
}

func TestScanRequest(t *testing.T) {
	ok := marshal(t, &rlsv3.RateLimitRequest{Domain: "d", HitsAddend: 3, Descriptors: []*ratelimitv3.RateLimitDescriptor{
		descOf(entry("k", strings.Repeat("v", 5000)), entry("key45678", "")),
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry("a", "b")}, HitsAddend: wrapperspb.UInt64(2),
			Limit: &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3}},
	}})
	empty3 := wireField(wireField(wireField(nil, 2, nil), 2, nil), 2, nil)
	// An entry of two keys, the long one first: the last one counts.
	twoKeys := wireField(wireField(nil, 1, []byte("123456789")), 1, []byte("k"))
	cases := []struct {
		name string
		wire []byte
		want string // "" for no error
	}{
		{"valid, a long value", ok, ""},
		{"empty", nil, ""},
		{"3 empty descriptors", empty3, ""},
		{"4 empty descriptors", wireField(empty3, 2, nil), "4 descriptors, over the bound of 3"},
		{"a million empty descriptors", bytes.Repeat([]byte{0x12, 0}, 1<<20), "1048576 descriptors, over the bound of 3"},
		{"5 descriptors, garbage after the 4th", append(wireField(empty3, 2, nil), 0x12, 0x09), "not a RateLimitRequest"},
		{"3 entries", wireField(nil, 2, wireField(wireField(wireField(nil, 1, nil), 1, nil), 1, nil)), "descriptor 0 has 3 entries, over the bound of 2"},
		{"long key", wireField(wireField(nil, 2, nil), 2, wireField(nil, 1, wireField(nil, 1, []byte("123456789")))), "descriptor 1, entry 0: key is 9 bytes"},
		{"long key then short: the last wins", wireField(nil, 2, wireField(nil, 1, twoKeys)), ""},
		{"long domain", wireField(nil, 1, []byte("123456789")), "domain is 9 bytes"},
		{"long domain then short", wireField(wireField(nil, 1, []byte("123456789")), 1, []byte("d")), ""},
		{"descriptors as a varint: unknown", protowire.AppendVarint(tag(nil, 2, protowire.VarintType), 7), ""},
		{"a group of unknown fields", tag(protowire.AppendVarint(tag(tag(nil, 9, protowire.StartGroupType), 1, protowire.VarintType), 1), 9, protowire.EndGroupType), ""},
		{"truncated tag", []byte{0x80}, "not a RateLimitRequest"},
		{"varint overflow", append(tag(nil, 3, protowire.VarintType), bytes.Repeat([]byte{0xff}, 10)...), "not a RateLimitRequest"},
		{"length past the end", []byte{0x12, 0x05, 0x0a}, "not a RateLimitRequest"},
		{"nested length past the end", wireField(nil, 2, []byte{0x0a, 0x09, 0x0a, 0x01}), "not a RateLimitRequest"},
		{"key length past the end", wireField(nil, 2, wireField(nil, 1, []byte{0x0a, 0x7f})), "not a RateLimitRequest"},
		{"field number 0", []byte{0x02, 0x00}, "not a RateLimitRequest"},
		{"stray end of group", tag(nil, 4, protowire.EndGroupType), "not a RateLimitRequest"},
		{"unclosed group", tag(nil, 4, protowire.StartGroupType), "not a RateLimitRequest"},
		{"garbage", []byte("\xff\xff\xff\xff"), "not a RateLimitRequest"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := scanBounds.ScanRequest(c.wire)
			if c.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, codes.InvalidArgument, status.Code(err))
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestScanRequestAllocates(t *testing.T) {
	req := &rlsv3.RateLimitRequest{Domain: "d"}
	for range DefaultMaxDescriptors {
		req.Descriptors = append(req.Descriptors, descOf(entry("k", "v"), entry("path", "/a/b")))
	}
	within := marshal(t, req)
	allocs := testing.AllocsPerRun(10, func() { _ = Bounds{}.ScanRequest(within) })
	assert.Zero(t, allocs, "a request within the bounds")
	past := bytes.Repeat([]byte{0x12, 0}, 1<<20)
	allocs = testing.AllocsPerRun(10, func() { _ = Bounds{}.ScanRequest(past) })
	assert.LessOrEqual(t, allocs, 8.0, "a million descriptors: the error's allocations alone")
}

func TestScanJSON(t *testing.T) {
	cases := []struct {
		name, body string
		want       string
	}{
		{"valid", `{"domain":"d","hitsAddend":2,"descriptors":[{"entries":[{"key":"k","value":"` + strings.Repeat("v", 5000) + `"}],"limit":{"requests_per_unit":3}}]}`, ""},
		{"3 descriptors", `{"descriptors":[{},{},{}]}`, ""},
		{"4 descriptors", `{"descriptors":[{},{},{},{}]}`, "more than 3 descriptors"},
		{"a million descriptors", `{"descriptors":[{}` + strings.Repeat(`,{}`, 1<<20) + `]}`, "more than 3 descriptors"},
		{"null descriptors", `{"domain":"d","descriptors":null}`, ""},
		{"3 entries", `{"descriptors":[{"entries":[{},{},{}]}]}`, "descriptor 0 has more than 2 entries"},
		{"long key", `{"descriptors":[{},{"entries":[{"key":"123456789"}]}]}`, "descriptor 1, entry 0: key is 9 bytes"},
		{"escaped key", `{"descriptors":[{"entries":[{"key":"\u0031\u0032\u0033\u0034\u0035\u0036\u0037\u0038"}]}]}`, ""},
		{"escaped key, one more", `{"descriptors":[{"entries":[{"key":"\u0031\u0032\u0033\u0034\u0035\u0036\u0037\u00e9"}]}]}`, "key is 9 bytes"},
		{"a surrogate pair is 4 bytes", `{"domain":"12345\ud83d\ude00"}`, "domain is 9 bytes"},
		{"escaped field name", `{"d\u0065scriptors":[{},{},{},{}]}`, "more than 3 descriptors"},
		{"brackets in strings", `{"x":"]}","descriptors":[{"y":"[{"},{},{},{}]}`, "more than 3 descriptors"},
		{"numbers and literals", `{"hitsAddend":1e3,"x":[true,null,-1.5],"descriptors":[{"entries":[{"key":"k","value":"v"}],"limit":{"requests_per_unit":3}}]}`, ""},
		{"white space", " { \"descriptors\" :\n[ {} , {} ,\t{} , {} ] } ", "more than 3 descriptors"},
		{"long domain", `{"domain":"123456789"}`, "domain is 9 bytes"},
		{"nested unknown", `{"x":[{"descriptors":[{},{},{},{}]}],"descriptors":[]}`, ""},
		{"not an object", `[1,2]`, ""},
		{"truncated", `{"descriptors":[{},`, "not a RateLimitRequest"},
		{"garbage", `{"descriptors":]`, "not a RateLimitRequest"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := scanBounds.ScanJSON([]byte(c.body))
			if c.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, codes.InvalidArgument, status.Code(err))
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// boundsRefused is the Server's validate restricted to what the scan
// checks: counts and key lengths, not values nor emptiness.
func boundsRefused(req *rlsv3.RateLimitRequest, b Bounds) bool {
	if len(req.GetDomain()) > b.KeyLength || len(req.GetDescriptors()) > b.Descriptors {
		return true
	}
	for _, d := range req.GetDescriptors() {
		if len(d.GetEntries()) > b.Entries {
			return true
		}
		for _, e := range d.GetEntries() {
			if len(e.GetKey()) > b.KeyLength {
				return true
			}
		}
	}
	return false
}

// FuzzScan: on any bytes that proto.Unmarshal decodes, ScanRequest refuses
// exactly what the Server's bounds refuse after decoding, and never calls
// them malformed; the same holds of ScanJSON on the request's protojson.
func FuzzScan(f *testing.F) {
	f.Add(marshal(f, &rlsv3.RateLimitRequest{Domain: "dom", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		descOf(entry("k", "v"), entry("key45678", "x")), descOf(), {HitsAddend: wrapperspb.UInt64(1)}}}))
	f.Add(bytes.Repeat([]byte{0x12, 0}, 5))
	f.Add(wireField(nil, 2, wireField(nil, 1, wireField(wireField(nil, 1, []byte("123456789")), 1, []byte("k")))))
	f.Add(tag(protowire.AppendVarint(tag(tag(nil, 9, protowire.StartGroupType), 1, protowire.VarintType), 1), 9, protowire.EndGroupType))
	f.Add([]byte{0x0a, 0x09, '1', '2', '3', '4', '5', '6', '7', '8', '9'})
	f.Fuzz(func(t *testing.T, wire []byte) {
		scanErr := scanBounds.ScanRequest(wire)
		var req rlsv3.RateLimitRequest
		if proto.Unmarshal(wire, &req) != nil {
			return // refused either way
		}
		want := boundsRefused(&req, scanBounds)
		require.Equal(t, want, scanErr != nil, "scan: %v; request %v", scanErr, &req)
		if scanErr != nil {
			require.NotContains(t, scanErr.Error(), "not a RateLimitRequest")
		}
		js, err := protojson.Marshal(&req)
		require.NoError(t, err)
		require.Equal(t, want, scanBounds.ScanJSON(js) != nil, "JSON %s", js)
	})
}

// FuzzScanJSON: on any text that protojson decodes, ScanJSON refuses
// exactly what the Server's bounds refuse after decoding, and never calls
// it malformed.
func FuzzScanJSON(f *testing.F) {
	f.Add(`{"domain":"dom","descriptors":[{"entries":[{"key":"k","value":"v"},{"key":"key45678"}]},{},{"hitsAddend":"1"}]}`)
	f.Add(`{"descriptors":[{},{},{},{}]}`)
	f.Add(`{"d\u006fmain":"12345\ud83d\ude00","hits_addend":3}`)
	f.Add(` {"descriptors" : [ {"entries":[{"key":"\u00e9\u00e9\u00e9\u00e9\n"}], "limit":{"unit":"SECOND"}} ] } `)
	f.Fuzz(func(t *testing.T, body string) {
		scanErr := scanBounds.ScanJSON([]byte(body))
		var req rlsv3.RateLimitRequest
		if protojson.Unmarshal([]byte(body), &req) != nil {
			return // refused either way
		}
		require.Equal(t, boundsRefused(&req, scanBounds), scanErr != nil, "scan: %v; request %v", scanErr, &req)
		if scanErr != nil {
			require.NotContains(t, scanErr.Error(), "not a RateLimitRequest")
		}
	})
}
