package service

import (
	"google.golang.org/protobuf/encoding/protowire"
)

// The field numbers of envoy's messages that ScanRequest reads
// (envoy.service.ratelimit.v3.RateLimitRequest and
// envoy.extensions.common.ratelimit.v3.RateLimitDescriptor).
const (
	requestDomain      protowire.Number = 1 // string
	requestDescriptors protowire.Number = 2 // repeated RateLimitDescriptor
	descriptorEntries  protowire.Number = 1 // repeated RateLimitDescriptor.Entry
	entryKey           protowire.Number = 1 // string
)

// ScanRequest checks the wire bytes of a RateLimitRequest against the
// bounds before they are decoded: the number of descriptors, the entries
// of each, and the length of the domain and of each key, as the Server
// checks them after decoding. It allocates nothing and stops at the first
// bound passed, so a request of a million empty descriptors costs what its
// first 65 do. A value's length is not bounded here (only by the size of
// the whole message).
//
// Its error is a gRPC status with InvalidArgument that names the bound, or
// says that the bytes are not a RateLimitRequest; a nil error does not
// promise that the bytes decode (a nested message it does not read, such
// as a limit override, or a string that is not UTF-8, is left to the
// decoder). As proto.Unmarshal does, it takes the last of repeated
// occurrences of a singular field and treats a known field of the wrong
// wire type as unknown.
func (b Bounds) ScanRequest(wire []byte) error {
	b = b.withDefaults()
	descriptors, domain := 0, 0
	for len(wire) > 0 {
		num, typ, n := protowire.ConsumeTag(wire)
		if n < 0 {
			return notRequest(n)
		}
		wire = wire[n:]
		if typ != protowire.BytesType || (num != requestDomain && num != requestDescriptors) {
			if n = protowire.ConsumeFieldValue(num, typ, wire); n < 0 {
				return notRequest(n)
			}
			wire = wire[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(wire)
		if n < 0 {
			return notRequest(n)
		}
		wire = wire[n:]
		if num == requestDomain {
			domain = len(v)
			continue
		}
		if descriptors == b.Descriptors {
			n, err := countRest(wire, requestDescriptors)
			if err != nil {
				return err
			}
			return invalid(refusedDescriptors, "%d descriptors, over the bound of %d descriptors per request", descriptors+1+n, b.Descriptors)
		}
		if err := b.scanDescriptor(descriptors, v); err != nil {
			return err
		}
		descriptors++
	}
	if domain > b.KeyLength {
		return invalid(refusedDomain, "domain is %d bytes, over the bound of %d bytes (the key length bound)", domain, b.KeyLength)
	}
	return nil
}

// scanDescriptor checks descriptor i's entries and their keys.
func (b Bounds) scanDescriptor(i int, wire []byte) error {
	entries := 0
	for len(wire) > 0 {
		num, typ, n := protowire.ConsumeTag(wire)
		if n < 0 {
			return notRequest(n)
		}
		wire = wire[n:]
		if num != descriptorEntries || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, wire); n < 0 {
				return notRequest(n)
			}
			wire = wire[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(wire)
		if n < 0 {
			return notRequest(n)
		}
		wire = wire[n:]
		if entries == b.Entries {
			n, err := countRest(wire, descriptorEntries)
			if err != nil {
				return err
			}
			return invalid(refusedEntries, "descriptor %d has %d entries, over the bound of %d entries per descriptor", i, entries+1+n, b.Entries)
		}
		key, err := entryKeyLength(v)
		if err != nil {
			return err
		}
		if key > b.KeyLength {
			return invalid(refusedKeyLength, "descriptor %d, entry %d: key is %d bytes, over the bound of %d bytes", i, entries, key, b.KeyLength)
		}
		entries++
	}
	return nil
}

// entryKeyLength returns the length of an entry's key, the last one the
// entry holds.
func entryKeyLength(wire []byte) (int, error) {
	key := 0
	for len(wire) > 0 {
		num, typ, n := protowire.ConsumeTag(wire)
		if n < 0 {
			return 0, notRequest(n)
		}
		wire = wire[n:]
		if num == entryKey && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(wire)
			if n < 0 {
				return 0, notRequest(n)
			}
			key, wire = len(v), wire[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, wire); n < 0 {
			return 0, notRequest(n)
		}
		wire = wire[n:]
	}
	return key, nil
}

// countRest counts the occurrences of the length-delimited field num in
// the rest of a message, for an error's message: it reads tags and skips
// values, allocating nothing.
func countRest(wire []byte, num protowire.Number) (int, error) {
	count := 0
	for len(wire) > 0 {
		n0, typ, n := protowire.ConsumeTag(wire)
		if n < 0 {
			return 0, notRequest(n)
		}
		wire = wire[n:]
		if n = protowire.ConsumeFieldValue(n0, typ, wire); n < 0 {
			return 0, notRequest(n)
		}
		wire = wire[n:]
		if n0 == num && typ == protowire.BytesType {
			count++
		}
	}
	return count, nil
}

// notRequest is the error of bytes that are not a RateLimitRequest.
func notRequest(n int) error {
	return invalid(refusedMalformed, "the request is not a RateLimitRequest: %v", protowire.ParseError(n))
}
