package httpadapter

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"net/http"
	"strconv"
	"sync"
)

// Secret values.
//
// A grouping value that may be a credential (every cookie; the
// Authorization, Proxy-Authorization and Cookie headers; any header or
// query parameter a rule lists in Rule.Secret) never becomes part of a
// counter id as it is: the id holds the first SecretHexLength hex digits
// of its HMAC-SHA256 under the middleware's key instead. HMAC-SHA256 is a
// keyed pseudo-random function: without the key, an id (in Redis, a
// snapshot, the cluster's traffic, the limits page) says nothing of the
// value, and nobody can make two values share a counter on purpose; with
// the key, an operator finds a token's group with
//
//	printf %s "$TOKEN" | openssl dgst -sha256 -hmac "$KEY" -r | cut -c1-32
//
// 128 bits keep accidental collisions (two clients sharing a counter) out
// of reach: about one chance in 10^26 for a million live values.

// SecretHexLength is how many hex digits of a secret value's HMAC-SHA256 a
// counter id holds: 32, that is 128 bits.
const SecretHexLength = 32

// MinSecretKey is the shortest Config.SecretKey accepted, in bytes.
const MinSecretKey = 16

// secretHeaders are the headers always hashed: they carry credentials.
var secretHeaders = map[string]bool{
	"Authorization":       true,
	"Proxy-Authorization": true,
	"Cookie":              true,
}

// processKey is the key of every middleware whose Config.SecretKey is
// empty: 32 random bytes, drawn once per process.
var processKey = sync.OnceValue(func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails (it crashes the program instead)
	return k
})

// macer is a pooled HMAC with room for its sum, so that hashing a value
// allocates nothing.
type macer struct {
	h   hash.Hash
	sum [sha256.Size]byte
}

// newMacs returns the pool of HMACs under key.
func newMacs(key []byte) *sync.Pool {
	key = append([]byte(nil), key...)
	return &sync.Pool{New: func() any { return &macer{h: hmac.New(sha256.New, key)} }}
}

// hashTail replaces the bytes of b after pos, a secret value, by the field
// of its HMAC's first SecretHexLength hex digits.
func (m *Middleware) hashTail(b []byte, pos int) []byte {
	mc := m.macs.Get().(*macer)
	mc.h.Reset()
	mc.h.Write(b[pos:])
	sum := mc.h.Sum(mc.sum[:0])
	b = appendLen(b[:pos], SecretHexLength)
	b = hex.AppendEncode(b, sum[:SecretHexLength/2])
	m.macs.Put(mc)
	return b
}

// appendLen appends n and ':', the start of a field of n bytes.
func appendLen(b []byte, n int) []byte {
	return append(strconv.AppendInt(b, int64(n), 10), ':')
}

// secretByDefault reports whether c's values are hashed whatever the rule
// says: cookies and the headers that carry credentials.
func secretByDefault(c characteristic) bool {
	return c.kind == charCookie || c.kind == charHeader && secretHeaders[http.CanonicalHeaderKey(c.name)]
}
