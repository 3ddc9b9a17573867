package httpadapter

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/actorlimit/actorlimit"
)

// Counter keys.
//
// A rule's key is a sequence of self-delimiting fields: a present value is
// written as its length in decimal, ':' and its bytes ("9:127.0.0.1"); an
// absent one (no such header, no client IP) as "-". The first fields, fixed
// per rule, are its name, its policy and its characteristics; the request's
// values follow. Since every field starts with a digit or '-' and says where
// it ends, two different rules or two different value lists never give the
// same key, whatever bytes the values hold. A key longer than
// [actorlimit.MaxIDLength] keeps its prefix and has the values replaced by
// '#' and their SHA-256.

// maxPrefix bounds the fixed fields of a rule's keys, so that a key whose
// values are replaced by their hash is never longer than
// [actorlimit.MaxIDLength].
const maxPrefix = actorlimit.MaxIDLength - 1 - 2*sha256.Size

type charKind uint8

const (
	charIP charKind = iota + 1
	charHost
	charMethod
	charPath
	charHeader
	charQuery
	charCookie
)

// characteristic is one part of a grouping key.
type characteristic struct {
	kind   charKind
	name   string // canonical header name, query or cookie name
	secret bool   // its values are hashed (see secret.go)
}

// parseCharacteristic parses "ip", "host", "method", "path", "header:NAME",
// "query:NAME" or "cookie:NAME".
func parseCharacteristic(s string) (characteristic, error) {
	switch s {
	case "ip":
		return characteristic{kind: charIP}, nil
	case "host":
		return characteristic{kind: charHost}, nil
	case "method":
		return characteristic{kind: charMethod}, nil
	case "path":
		return characteristic{kind: charPath}, nil
	}
	kind, name, ok := strings.Cut(s, ":")
	if !ok || name == "" {
		return characteristic{}, fmt.Errorf("%q is not one of ip, host, method, path, header:NAME, query:NAME, cookie:NAME", s)
	}
	switch kind {
	case "header":
		if !validToken(name) {
			return characteristic{}, fmt.Errorf("%q: %q is not a header name", s, name)
		}
		if http.CanonicalHeaderKey(name) == "Host" {
			return characteristic{}, fmt.Errorf("%q: Go moves the Host header to Request.Host, so it would always be empty (one counter for every client): group by \"host\" instead", s)
		}
		return characteristic{kind: charHeader, name: http.CanonicalHeaderKey(name)}, nil
	case "query":
		return characteristic{kind: charQuery, name: name}, nil
	case "cookie":
		if !validToken(name) {
			return characteristic{}, fmt.Errorf("%q: %q is not a cookie name", s, name)
		}
		return characteristic{kind: charCookie, name: name}, nil
	}
	return characteristic{}, fmt.Errorf("%q is not one of ip, host, method, path, header:NAME, query:NAME, cookie:NAME", s)
}

func (c characteristic) String() string {
	switch c.kind {
	case charIP:
		return "ip"
	case charHost:
		return "host"
	case charMethod:
		return "method"
	case charPath:
		return "path"
	case charHeader:
		return "header:" + c.name
	case charQuery:
		return "query:" + c.name
	case charCookie:
		return "cookie:" + c.name
	}
	return "invalid"
}

// validToken reports whether s is an RFC 9110 token.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b <= ' ' || b >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, b) >= 0 {
			return false
		}
	}
	return true
}

// keyPrefix returns the fixed fields of a rule's keys.
func keyPrefix(name string, p actorlimit.Policy, chars []characteristic) string {
	var b []byte
	b = appendField(b, name)
	b = appendField(b, fmt.Sprintf("a%d/q%d/w%d/b%d", int(p.Algorithm), p.Limit, int64(p.Period), p.Burst))
	spec := make([]string, len(chars))
	for i, c := range chars {
		spec[i] = c.String()
		if c.secret {
			spec[i] += "(hmac)"
		}
	}
	b = appendField(b, strings.Join(spec, ","))
	return string(b)
}

func appendField(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

// appendKey appends rule's key for q to b.
func (ru *rule) appendKey(b []byte, q *request) []byte {
	start := len(b)
	b = append(b, ru.prefix...)
	vals := len(b)
	for i := range ru.chars {
		b = q.appendValue(b, &ru.chars[i])
	}
	if len(b)-start > actorlimit.MaxIDLength {
		sum := sha256.Sum256(b[vals:])
		b = append(b[:vals], '#')
		b = hex.AppendEncode(b, sum[:])
	}
	return b
}

// appendValue appends the field of characteristic c of q to b.
func (q *request) appendValue(b []byte, c *characteristic) []byte {
	switch c.kind {
	case charIP:
		ip, ok := q.groupIP()
		if !ok {
			return append(b, '-')
		}
		pos := len(b)
		return insertLen(ip.AppendTo(b), pos)
	case charHost:
		pos := len(b)
		h := hostName(q.r.Host)
		for i := 0; i < len(h); i++ {
			ch := h[i]
			if 'A' <= ch && ch <= 'Z' {
				ch += 'a' - 'A'
			}
			b = append(b, ch)
		}
		return insertLen(b, pos)
	case charMethod:
		return appendField(b, q.r.Method)
	case charPath:
		return appendField(b, q.path())
	case charHeader:
		vs := q.r.Header[c.name]
		if len(vs) == 0 {
			return append(b, '-')
		}
		if c.secret {
			return q.m.hashTail(append(b, vs[0]...), len(b))
		}
		return appendField(b, vs[0])
	case charQuery:
		if q.r.URL == nil {
			return append(b, '-')
		}
		pos := len(b)
		b, ok := appendQueryValue(b, q.r.URL.RawQuery, c.name)
		switch {
		case !ok:
			return append(b, '-')
		case c.secret:
			return q.m.hashTail(b, pos)
		}
		return insertLen(b, pos)
	case charCookie:
		v, ok := cookieValue(q.r.Header["Cookie"], c.name)
		if !ok {
			return append(b, '-')
		}
		return q.m.hashTail(append(b, v...), len(b)) // every cookie is secret
	}
	return append(b, '-')
}

// hostName returns the name of a Host value, so that the spellings of one
// host make one group: without the port ("a:80" is "a", "[::1]:80" is
// "::1") and without trailing dots ("a." is "a"); the caller lowers its
// case.
func hostName(h string) string {
	if strings.HasPrefix(h, "[") {
		if end := strings.IndexByte(h, ']'); end > 0 {
			return h[1:end]
		}
		return h
	}
	if i := strings.IndexByte(h, ':'); i >= 0 && strings.IndexByte(h[i+1:], ':') < 0 {
		h = h[:i] // one colon: a port; more: a bare IPv6 address
	}
	return strings.TrimRight(h, ".")
}

// insertLen turns the bytes of b after pos into a field: it inserts their
// length and ':' at pos.
func insertLen(b []byte, pos int) []byte {
	var tmp [24]byte
	lp := strconv.AppendInt(tmp[:0], int64(len(b)-pos), 10)
	lp = append(lp, ':')
	n := len(lp)
	b = append(b, lp...) // grow by n
	copy(b[pos+n:], b[pos:len(b)-n])
	copy(b[pos:], lp)
	return b
}

// appendQueryValue appends the unescaped value of the first parameter
// called name in rawQuery to b; ok is false when there is none. Parameters
// are separated by '&' only, as net/url does.
func appendQueryValue(b []byte, rawQuery, name string) ([]byte, bool) {
	for rawQuery != "" {
		var kv string
		kv, rawQuery, _ = strings.Cut(rawQuery, "&")
		k, v, _ := strings.Cut(kv, "=")
		if k != name {
			if !strings.ContainsAny(k, "%+") {
				continue
			}
			uk, ok := unescapeQuery(nil, k)
			if !ok || string(uk) != name {
				continue
			}
		}
		pos := len(b)
		if out, ok := unescapeQuery(b, v); ok {
			return out, true
		}
		return append(b[:pos], v...), true // bad escape: the raw value
	}
	return b, false
}

// unescapeQuery appends s with '+' as ' ' and %XX decoded to b.
func unescapeQuery(b []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; ch {
		case '+':
			b = append(b, ' ')
		case '%':
			if i+2 >= len(s) {
				return b, false
			}
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 {
				return b, false
			}
			b = append(b, hi<<4|lo)
			i += 2
		default:
			b = append(b, ch)
		}
	}
	return b, true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// cookieValue returns the value of the first cookie called name in the
// Cookie header lines, without surrounding double quotes.
func cookieValue(lines []string, name string) (string, bool) {
	for _, line := range lines {
		for line != "" {
			var part string
			part, line, _ = strings.Cut(line, ";")
			part = strings.TrimLeft(part, " \t")
			k, v, ok := strings.Cut(part, "=")
			if !ok || strings.TrimRight(k, " \t") != name {
				continue
			}
			v = strings.TrimSpace(v)
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v, true
		}
	}
	return "", false
}

// cleanPath returns p cleaned as net/http's ServeMux does (path.Clean,
// keeping a trailing slash), without allocating when p is already clean.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	if isClean(p) {
		return p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		if len(p) == len(np)+1 && strings.HasPrefix(p, np) {
			return p
		}
		return np + "/"
	}
	return np
}

// isClean reports whether p, which starts with '/', has no empty, "." or
// ".." segment (but for a trailing slash), so cleaning would keep it.
func isClean(p string) bool {
	seg := 1 // start of the current segment
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		switch s := p[seg:i]; {
		case s == "" && i < len(p), s == ".", s == "..":
			return false
		}
		seg = i + 1
	}
	return true
}
