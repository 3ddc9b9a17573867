package service

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"sync"
)

// Secret and long values.
//
// A counter id is the domain and each entry's key and value, each field
// prefixed by its length ("4:edge7:api_key..."). Three things change that,
// so that no client can make an id that is refused, that costs more than a
// bounded number of bytes, or that holds a credential in clear:
//
//   - the value of a secret key (Secrets.Keys, or a descriptor of the
//     configuration that says secret: true) is written as its HMAC-SHA256
//     under Secrets.Key: the field "h43:" and the 256-bit MAC in unpadded
//     base64url (43 characters);
//   - any other value longer than Bounds.ValueLength is written the same
//     way, under Secrets.Key when one is given, else under a fixed key of
//     this package (such values are no secrets: the key only keeps a
//     client from choosing two values that collide, and it is the same in
//     every process, so that Redis or a cluster counts them together);
//   - an id still longer than MaxStoredID bytes is replaced by '#' and the
//     base64url HMAC-SHA256 of the whole id under that same key.
//
// A plain field starts with a digit and a digested one with 'h' or '#', so
// no value a client sends can be taken for a digest. Two values share a
// counter only if their MACs collide: 2^128 work for a 256-bit MAC, with or
// without the key. Rules still match the real values; only the counter ids
// and the metric labels hold the digests.

// MaxStoredID bounds the bytes of a counter id: a longer id is counted
// under its 44-byte digest, so that a table entry, a Redis key or a
// snapshot record is small whatever clients send. 256 bytes keep readable
// the ids of every ordinary descriptor (a domain, a few keys, addresses and
// paths).
const MaxStoredID = 256

// DefaultSecretKeys are the descriptor keys whose values are secret unless
// Secrets.Keys says otherwise: the names Envoy's request_headers actions
// are usually given for credentials.
var DefaultSecretKeys = []string{"authorization", "proxy-authorization", "cookie", "api_key", "x-api-key"}

// MinSecretKey is the shortest Secrets.Key accepted, in bytes.
const MinSecretKey = 16

// ErrSecretKey is wrapped by New's error when Secrets.Key is too short, or
// empty while the Limiter's counts are shared or kept
// (actorlimit.Limiter.SharedCounts) and some key is secret: a key drawn per
// process would count a secret value apart on every process and after
// every restart.
var ErrSecretKey = errors.New("service: Secrets.Key")

// Secrets says which descriptor values are secret and the key of the HMAC
// that hides them.
type Secrets struct {
	// Key is the HMAC-SHA256 key, at least MinSecretKey bytes. Empty, a key
	// of 32 random bytes is drawn for the Server, which New accepts only
	// when the Limiter's counts are neither shared nor kept, or no key is
	// secret (Keys empty and the configuration marks none).
	Key []byte
	// Keys are the descriptor keys whose values are secret: nil means
	// DefaultSecretKeys, an empty non-nil slice none (as envoy ratelimit,
	// which hashes nothing). A descriptor of the configuration that says
	// secret: true adds its key, in its domain.
	Keys []string
}

// longKey is the key of long values' digests without Secrets.Key: fixed,
// so that every process counts a long value under the same id.
var longKey = []byte("actorlimitd long descriptor value v1")

// hasher turns secret and long values, and long ids, into digests.
type hasher struct {
	secret   *sync.Pool // of *macer under the secret key
	long     *sync.Pool // of *macer under the long values' key
	keys     map[string]bool
	maxValue int
	keyed    bool // the secret key was given, not drawn
}

// macer is a pooled HMAC with room for its sum, and a buffer through
// which what it hashes is copied (so that nothing a caller hashes escapes
// to the heap through the hash.Hash interface).
type macer struct {
	h     hash.Hash
	sum   [sha256.Size]byte
	chunk [512]byte
}

func newMacs(key []byte) *sync.Pool {
	key = append([]byte(nil), key...)
	return &sync.Pool{New: func() any { return &macer{h: hmac.New(sha256.New, key)} }}
}

// digestLen is the length of a digest: a SHA-256 sum in base64url without
// padding.
const digestLen = 43

// newHasher checks s against shared (the limiter's counts are shared or
// kept) and returns its hasher.
func newHasher(s Secrets, maxValue int, shared bool) (*hasher, error) {
	h := &hasher{maxValue: maxValue, keys: map[string]bool{}}
	keys := s.Keys
	if keys == nil {
		keys = DefaultSecretKeys
	}
	for _, k := range keys {
		h.keys[k] = true
	}
	switch n := len(s.Key); {
	case n == 0 && shared && len(h.keys) > 0:
		return nil, fmt.Errorf("%w is empty while the limiter's counts are shared or kept and %d descriptor keys are secret: give every process the same key", ErrSecretKey, len(h.keys))
	case n == 0:
		k := make([]byte, 32)
		_, _ = rand.Read(k) // crypto/rand.Read never fails
		h.secret, h.long = newMacs(k), newMacs(longKey)
	case n < MinSecretKey:
		return nil, fmt.Errorf("%w is %d bytes, fewer than the %d wanted", ErrSecretKey, n, MinSecretKey)
	default:
		h.secret, h.long, h.keyed = newMacs(s.Key), newMacs(s.Key), true
	}
	return h, nil
}

// secretKey reports whether key's values are secret in a domain whose
// configuration marks domainKeys secret.
func (h *hasher) secretKey(key string, domainKeys map[string]bool) bool {
	return h != nil && (h.keys[key] || domainKeys[key])
}

// appendMAC appends the base64url HMAC-SHA256 of v under pool's key.
func appendMAC(b []byte, pool *sync.Pool, v string) []byte {
	mc := pool.Get().(*macer)
	mc.h.Reset()
	for len(v) > 0 {
		n := copy(mc.chunk[:], v)
		mc.h.Write(mc.chunk[:n])
		v = v[n:]
	}
	b = base64.RawURLEncoding.AppendEncode(b, mc.h.Sum(mc.sum[:0]))
	pool.Put(mc)
	return b
}

// appendMACBytes is appendMAC of bytes.
func appendMACBytes(b []byte, pool *sync.Pool, v []byte) []byte {
	mc := pool.Get().(*macer)
	mc.h.Reset()
	for len(v) > 0 {
		n := copy(mc.chunk[:], v)
		mc.h.Write(mc.chunk[:n])
		v = v[n:]
	}
	b = base64.RawURLEncoding.AppendEncode(b, mc.h.Sum(mc.sum[:0]))
	pool.Put(mc)
	return b
}

// appendValue appends v's field to an id: its digest when it is secret or
// longer than the bound, else v itself.
func (h *hasher) appendValue(b []byte, v string, secret bool) []byte {
	switch {
	case h == nil || !secret && len(v) <= h.maxValue:
		return appendField(b, v)
	case secret:
		return appendMAC(append(b, 'h', '4', '3', ':'), h.secret, v)
	default:
		return appendMAC(append(b, 'h', '4', '3', ':'), h.long, v)
	}
}

// labelValue returns v as a metric label holds it: its digest when it is
// secret or longer than the bound.
func (h *hasher) labelValue(v string, secret bool) string {
	switch {
	case h == nil || !secret && len(v) <= h.maxValue:
		return v
	case secret:
		return string(appendMAC(make([]byte, 0, digestLen), h.secret, v))
	default:
		return string(appendMAC(make([]byte, 0, digestLen), h.long, v))
	}
}

// finish returns the id b, or its digest when it is longer than
// MaxStoredID.
func (h *hasher) finish(b []byte) string {
	if h == nil || len(b) <= MaxStoredID {
		return string(b)
	}
	var d [1 + digestLen]byte
	return string(appendMACBytes(append(d[:0], '#'), h.long, b))
}
