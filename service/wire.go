package service

import (
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// This file holds the codec's own decoder of a RateLimitRequest and
// encoder of a RateLimitResponse: the shapes Envoy sends and the Server
// answers, with fewer allocations than the standard proto codec. Each
// reports false for a message it does not handle (a field it does not
// read, unknown fields, a string that is not UTF-8), and the codec then
// uses the standard one, so that every input decodes and every answer
// encodes as proto.Unmarshal and proto.Marshal would (FuzzDecodeRequest,
// FuzzEncodeResponse hold them to it).

// The fields of RateLimitRequest, RateLimitDescriptor and its Entry that
// decodeRequest reads besides those scan.go names.
const (
	requestHitsAddend protowire.Number = 3 // uint32
	entryValue        protowire.Number = 2 // string
)

// decodeRequest decodes wire into req, which must be empty, and reports
// whether it could: a request of domain, descriptors of entries (keys and
// values) and hits_addend, and nothing else. It makes two allocations for
// a request of up to 4 descriptors and 8 entries, five past that: one
// string that every string of the request is a part of, and the arrays of
// the descriptors, the entries and their pointers (see requestArrays). On
// false, req is left empty.
func decodeRequest(wire []byte, req *rlsv3.RateLimitRequest) bool {
	descriptors, entries, ok := countRequest(wire)
	if !ok {
		return false
	}
	all := string(wire)
	ds, dp, es, ep := requestArrays(descriptors, entries)
	off, d, e := 0, 0, 0
	for off < len(wire) {
		num, typ, n := protowire.ConsumeTag(wire[off:])
		off += n
		if typ == protowire.VarintType { // hits_addend: countRequest checked the rest
			v, n := protowire.ConsumeVarint(wire[off:])
			req.HitsAddend, off = uint32(v), off+n
			continue
		}
		v, n := protowire.ConsumeBytes(wire[off:])
		start := off + n - len(v)
		off += n
		if num == requestDomain {
			req.Domain = all[start : start+len(v)]
			continue
		}
		first := e
		for doff := 0; doff < len(v); {
			_, _, n := protowire.ConsumeTag(v[doff:])
			doff += n
			ev, n := protowire.ConsumeBytes(v[doff:])
			estart := start + doff + n - len(ev)
			doff += n
			entry := &es[e]
			for eoff := 0; eoff < len(ev); {
				num, _, n := protowire.ConsumeTag(ev[eoff:])
				eoff += n
				s, n := protowire.ConsumeBytes(ev[eoff:])
				sstart := estart + eoff + n - len(s)
				eoff += n
				if num == entryKey {
					entry.Key = all[sstart : sstart+len(s)]
				} else {
					entry.Value = all[sstart : sstart+len(s)]
				}
			}
			ep[e] = entry
			e++
		}
		ds[d].Entries = ep[first:e:e]
		dp[d] = &ds[d]
		d++
	}
	req.Descriptors = dp
	return true
}

// requestArrays returns the arrays of a request's descriptors and entries
// and of their pointers: for the shapes Envoy sends most (one descriptor of
// one entry; up to 4 descriptors of 8 entries in all) parts of one
// allocation, else four.
func requestArrays(descriptors, entries int) ([]ratelimitv3.RateLimitDescriptor, []*ratelimitv3.RateLimitDescriptor, []ratelimitv3.RateLimitDescriptor_Entry, []*ratelimitv3.RateLimitDescriptor_Entry) {
	switch {
	case descriptors <= 1 && entries <= 1:
		a := new(struct {
			ds [1]ratelimitv3.RateLimitDescriptor
			dp [1]*ratelimitv3.RateLimitDescriptor
			es [1]ratelimitv3.RateLimitDescriptor_Entry
			ep [1]*ratelimitv3.RateLimitDescriptor_Entry
		})
		return a.ds[:descriptors], a.dp[:descriptors:descriptors], a.es[:entries], a.ep[:entries]
	case descriptors <= 4 && entries <= 8:
		a := new(struct {
			ds [4]ratelimitv3.RateLimitDescriptor
			dp [4]*ratelimitv3.RateLimitDescriptor
			es [8]ratelimitv3.RateLimitDescriptor_Entry
			ep [8]*ratelimitv3.RateLimitDescriptor_Entry
		})
		return a.ds[:descriptors], a.dp[:descriptors:descriptors], a.es[:entries], a.ep[:entries]
	}
	return make([]ratelimitv3.RateLimitDescriptor, descriptors), make([]*ratelimitv3.RateLimitDescriptor, descriptors),
		make([]ratelimitv3.RateLimitDescriptor_Entry, entries), make([]*ratelimitv3.RateLimitDescriptor_Entry, entries)
}

// countRequest counts the descriptors and entries of a request and
// reports whether decodeRequest handles it.
func countRequest(wire []byte) (descriptors, entries int, ok bool) {
	for len(wire) > 0 {
		num, typ, n := protowire.ConsumeTag(wire)
		if n < 0 {
			return 0, 0, false
		}
		wire = wire[n:]
		if num == requestHitsAddend && typ == protowire.VarintType {
			if _, n = protowire.ConsumeVarint(wire); n < 0 {
				return 0, 0, false
			}
			wire = wire[n:]
			continue
		}
		if typ != protowire.BytesType || (num != requestDomain && num != requestDescriptors) {
			return 0, 0, false
		}
		v, n := protowire.ConsumeBytes(wire)
		if n < 0 {
			return 0, 0, false
		}
		wire = wire[n:]
		if num == requestDomain {
			if !utf8.Valid(v) {
				return 0, 0, false
			}
			continue
		}
		k, ok := countDescriptor(v)
		if !ok {
			return 0, 0, false
		}
		descriptors, entries = descriptors+1, entries+k
	}
	return descriptors, entries, true
}

// countDescriptor counts a descriptor's entries and reports whether
// decodeRequest handles it: entries only, each of a key and a value.
func countDescriptor(wire []byte) (int, bool) {
	k := 0
	for len(wire) > 0 {
		num, typ, n := protowire.ConsumeTag(wire)
		if n < 0 || num != descriptorEntries || typ != protowire.BytesType {
			return 0, false
		}
		wire = wire[n:]
		v, n := protowire.ConsumeBytes(wire)
		if n < 0 {
			return 0, false
		}
		wire = wire[n:]
		for len(v) > 0 {
			num, typ, n := protowire.ConsumeTag(v)
			if n < 0 || (num != entryKey && num != entryValue) || typ != protowire.BytesType {
				return 0, false
			}
			v = v[n:]
			s, n := protowire.ConsumeBytes(v)
			if n < 0 || !utf8.Valid(s) {
				return 0, false
			}
			v = v[n:]
		}
		k++
	}
	return k, true
}

// The fields of the answer's messages (envoy.service.ratelimit.v3's
// RateLimitResponse, its DescriptorStatus and RateLimit,
// envoy.config.core.v3.HeaderValue, google.protobuf.Duration and
// UInt32Value), in the order proto.Marshal writes them.
const (
	respOverallCode     protowire.Number = 1
	respStatuses        protowire.Number = 2
	respResponseHeaders protowire.Number = 3
	respRequestHeaders  protowire.Number = 4
	respRawBody         protowire.Number = 5

	statusCode           protowire.Number = 1
	statusCurrentLimit   protowire.Number = 2
	statusLimitRemaining protowire.Number = 3
	statusDuration       protowire.Number = 4

	limitRequestsPerUnit protowire.Number = 1
	limitUnit            protowire.Number = 2
	limitName            protowire.Number = 3
	limitUnitMultiplier  protowire.Number = 4

	headerKey      protowire.Number = 1
	headerValue    protowire.Number = 2
	headerRawValue protowire.Number = 3

	durationSeconds protowire.Number = 1
	durationNanos   protowire.Number = 2

	wrapperValue protowire.Number = 1
)

// responseSize returns the encoded size of m and reports whether
// appendResponse handles it: no dynamic metadata, no quota, no unknown
// fields, no nil element in a list, every string UTF-8.
func responseSize(m *rlsv3.RateLimitResponse) (int, bool) {
	if m.DynamicMetadata != nil || m.Quota != nil || unknown(m) {
		return 0, false
	}
	size := varintField(respOverallCode, uint64(m.OverallCode))
	for _, st := range m.Statuses {
		n, ok := statusSize(st)
		if !ok {
			return 0, false
		}
		size += messageField(respStatuses, n)
	}
	for _, hs := range [2][]*corev3.HeaderValue{m.ResponseHeadersToAdd, m.RequestHeadersToAdd} {
		for _, h := range hs {
			n, ok := headerSize(h)
			if !ok {
				return 0, false
			}
			size += messageField(respResponseHeaders, n)
		}
	}
	return size + bytesField(respRawBody, len(m.RawBody)), true
}

// appendResponse appends m, of which responseSize reported true, as
// proto.Marshal writes it.
func appendResponse(b []byte, m *rlsv3.RateLimitResponse) []byte {
	b = appendVarintField(b, respOverallCode, uint64(m.OverallCode))
	for _, st := range m.Statuses {
		n, _ := statusSize(st)
		b = protowire.AppendTag(b, respStatuses, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(n))
		b = appendStatus(b, st)
	}
	for i, hs := range [2][]*corev3.HeaderValue{m.ResponseHeadersToAdd, m.RequestHeadersToAdd} {
		num := respResponseHeaders
		if i == 1 {
			num = respRequestHeaders
		}
		for _, h := range hs {
			n, _ := headerSize(h)
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(n))
			b = appendBytesField(b, headerKey, h.Key)
			b = appendBytesField(b, headerValue, h.Value)
			b = appendBytesField(b, headerRawValue, h.RawValue)
		}
	}
	return appendBytesField(b, respRawBody, m.RawBody)
}

func statusSize(st *rlsv3.RateLimitResponse_DescriptorStatus) (int, bool) {
	if st == nil || st.Quota != nil || unknown(st) {
		return 0, false
	}
	size := varintField(statusCode, uint64(st.Code)) + varintField(statusLimitRemaining, uint64(st.LimitRemaining))
	if l := st.CurrentLimit; l != nil {
		n, ok := limitSize(l)
		if !ok {
			return 0, false
		}
		size += messageField(statusCurrentLimit, n)
	}
	if d := st.DurationUntilReset; d != nil {
		if unknown(d) {
			return 0, false
		}
		size += messageField(statusDuration, durationSize(d.Seconds, d.Nanos))
	}
	return size, true
}

func appendStatus(b []byte, st *rlsv3.RateLimitResponse_DescriptorStatus) []byte {
	b = appendVarintField(b, statusCode, uint64(st.Code))
	if l := st.CurrentLimit; l != nil {
		n, _ := limitSize(l)
		b = protowire.AppendTag(b, statusCurrentLimit, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(n))
		b = appendVarintField(b, limitRequestsPerUnit, uint64(l.RequestsPerUnit))
		b = appendVarintField(b, limitUnit, uint64(l.Unit))
		b = appendBytesField(b, limitName, l.Name)
		if u := l.UnitMultiplier; u != nil {
			b = protowire.AppendTag(b, limitUnitMultiplier, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(varintField(wrapperValue, uint64(u.Value))))
			b = appendVarintField(b, wrapperValue, uint64(u.Value))
		}
	}
	b = appendVarintField(b, statusLimitRemaining, uint64(st.LimitRemaining))
	if d := st.DurationUntilReset; d != nil {
		b = protowire.AppendTag(b, statusDuration, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(durationSize(d.Seconds, d.Nanos)))
		b = appendVarintField(b, durationSeconds, uint64(d.Seconds))
		b = appendVarintField(b, durationNanos, uint64(int64(d.Nanos)))
	}
	return b
}

func limitSize(l *rlsv3.RateLimitResponse_RateLimit) (int, bool) {
	if unknown(l) || !utf8.ValidString(l.Name) {
		return 0, false
	}
	size := varintField(limitRequestsPerUnit, uint64(l.RequestsPerUnit)) + varintField(limitUnit, uint64(l.Unit)) + bytesField(limitName, len(l.Name))
	if u := l.UnitMultiplier; u != nil {
		if unknown(u) {
			return 0, false
		}
		size += messageField(limitUnitMultiplier, varintField(wrapperValue, uint64(u.Value)))
	}
	return size, true
}

func headerSize(h *corev3.HeaderValue) (int, bool) {
	if h == nil || unknown(h) || !utf8.ValidString(h.Key) || !utf8.ValidString(h.Value) {
		return 0, false
	}
	return bytesField(headerKey, len(h.Key)) + bytesField(headerValue, len(h.Value)) + bytesField(headerRawValue, len(h.RawValue)), true
}

func durationSize(sec int64, nanos int32) int {
	return varintField(durationSeconds, uint64(sec)) + varintField(durationNanos, uint64(int64(nanos)))
}

// unknown reports whether m holds unknown fields, which the standard
// codec writes and appendResponse does not.
func unknown(m proto.Message) bool { return len(m.ProtoReflect().GetUnknown()) > 0 }

// varintField is the size of a varint field, 0 for a zero value (proto3
// writes no field of a zero value).
func varintField(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

// bytesField is the size of a string or bytes field of n bytes, 0 when
// empty.
func bytesField(num protowire.Number, n int) int {
	if n == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// messageField is the size of a message field of n bytes (written even
// when empty).
func messageField(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendBytesField[S string | []byte](b []byte, num protowire.Number, v S) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(len(v)))
	return append(b, v...)
}
