package unary

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http2"
)

// This file writes frames and header blocks. Header blocks are HPACK
// literals "without indexing" (and the one static entry :status 200), and
// the first block of a connection starts with a dynamic table size update
// to 0: the server keeps no dynamic table, so any SETTINGS_HEADER_TABLE_SIZE
// of the client is honoured, and no answer depends on another's.

// Frame types and flags, as written.
const (
	frameData         = byte(http2.FrameData)
	frameHeaders      = byte(http2.FrameHeaders)
	frameRSTStream    = byte(http2.FrameRSTStream)
	frameSettings     = byte(http2.FrameSettings)
	framePing         = byte(http2.FramePing)
	frameGoAway       = byte(http2.FrameGoAway)
	frameWindowUpdate = byte(http2.FrameWindowUpdate)
	frameContinuation = byte(http2.FrameContinuation)

	flagEndStream  = byte(http2.FlagDataEndStream)
	flagEndHeaders = byte(http2.FlagHeadersEndHeaders)
	flagAck        = byte(http2.FlagSettingsAck)
)

// appendFrameHeader appends the 9-byte header of a frame.
func appendFrameHeader(b []byte, length int, typ, flags byte, id uint32) []byte {
	return append(b, byte(length>>16), byte(length>>8), byte(length), typ, flags,
		byte(id>>24)&0x7f, byte(id>>16), byte(id>>8), byte(id))
}

// HPACK bytes of the fields every answer carries.
const (
	hpackTableSizeZero = "\x20" // dynamic table size update: 0
	hpackStatus200     = "\x88" // static entry 8
)

// appendInt appends an HPACK integer with an n-bit prefix, the prefix's
// other bits being first's.
func appendInt(b []byte, first byte, n uint, v uint64) []byte {
	limit := uint64(1)<<n - 1
	if v < limit {
		return append(b, first|byte(v))
	}
	b = append(b, first|byte(limit))
	v -= limit
	for v >= 128 {
		b = append(b, byte(v&0x7f|0x80))
		v >>= 7
	}
	return append(b, byte(v))
}

// appendString appends an HPACK string literal, not Huffman coded.
func appendString(b []byte, s string) []byte {
	return append(appendInt(b, 0, 7, uint64(len(s))), s...)
}

// appendLiteral appends a field as a literal without indexing, its name
// new.
func appendLiteral(b []byte, name, value string) []byte {
	return appendString(appendString(append(b, 0), name), value)
}

// appendLiteralIndexed appends a field as a literal without indexing, its
// name the static table's entry idx.
func appendLiteralIndexed(b []byte, idx uint64, value string) []byte {
	return appendString(appendInt(b, 0, 4, idx), value)
}

// Static table entries of the names answers use.
const (
	staticStatus      = 8
	staticContentType = 31
)

// contentType is the answer's content-type for a request's subtype, as
// grpc-go writes it.
func contentType(subtype string) string {
	if subtype == "" {
		return "application/grpc"
	}
	return "application/grpc+" + subtype
}

// contentSubtype returns the subtype of a gRPC content-type and whether it
// is one, as grpc-go reads it.
func contentSubtype(ct string) (string, bool) {
	const base = "application/grpc"
	if ct == base {
		return "", true
	}
	if len(ct) <= len(base) || ct[:len(base)] != base {
		return "", false
	}
	switch ct[len(base)] {
	case '+', ';':
		return ct[len(base)+1:], true
	}
	return "", false
}

// appendStatusFields appends grpc-status, grpc-message (percent-encoded)
// and, when there are details, grpc-status-details-bin.
func appendStatusFields(b []byte, code uint32, msg string, details []byte) []byte {
	b = appendLiteral(b, "grpc-status", strconv.FormatUint(uint64(code), 10))
	b = appendLiteral(b, "grpc-message", encodeMessage(msg))
	if len(details) > 0 {
		b = appendLiteral(b, "grpc-status-details-bin", base64.RawStdEncoding.EncodeToString(details))
	}
	return b
}

// encodeMessage percent-encodes a status message as the gRPC spec says
// and grpc-go does: bytes outside printable ASCII, and '%'; a byte that is
// not UTF-8 is encoded as U+FFFD's bytes.
func encodeMessage(msg string) string {
	clean := true
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c < ' ' || c > '~' || c == '%' {
			clean = false
			break
		}
	}
	if clean {
		return msg
	}
	const hex = "0123456789ABCDEF"
	out := make([]byte, 0, len(msg)*3)
	for len(msg) > 0 {
		r, size := utf8.DecodeRuneInString(msg)
		var enc [utf8.UTFMax]byte
		n := utf8.EncodeRune(enc[:], r)
		for _, c := range enc[:n] {
			if size == 1 && c >= ' ' && c <= '~' && c != '%' {
				out = append(out, c)
				continue
			}
			out = append(out, '%', hex[c>>4], hex[c&15])
		}
		msg = msg[size:]
	}
	return string(out)
}

// decodeTimeout reads grpc-timeout as grpc-go does.
func decodeTimeout(s string) (time.Duration, error) {
	size := len(s)
	if size < 2 {
		return 0, fmt.Errorf("transport: timeout string is too short: %q", s)
	}
	if size > 9 {
		return 0, fmt.Errorf("transport: timeout string is too long: %q", s)
	}
	var d time.Duration
	switch s[size-1] {
	case 'H':
		d = time.Hour
	case 'M':
		d = time.Minute
	case 'S':
		d = time.Second
	case 'm':
		d = time.Millisecond
	case 'u':
		d = time.Microsecond
	case 'n':
		d = time.Nanosecond
	default:
		return 0, fmt.Errorf("transport: timeout unit is not recognized: %q", s)
	}
	t, err := strconv.ParseUint(s[:size-1], 10, 64)
	if err != nil {
		return 0, err
	}
	if d == time.Hour && t > math.MaxInt64/uint64(time.Hour) {
		return time.Duration(math.MaxInt64), nil
	}
	return d * time.Duration(t), nil
}

// grpcPrefix is the 5-byte prefix of a gRPC message: not compressed, its
// length.
func grpcPrefix(n int) [5]byte {
	var p [5]byte
	binary.BigEndian.PutUint32(p[1:], uint32(n))
	return p
}
