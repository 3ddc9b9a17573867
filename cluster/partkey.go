package cluster

import (
	"crypto/sha256"
	"encoding/binary"
	"unsafe"

	"github.com/dchest/siphash"
)

// The partition hash. An id's partition is SipHash-2-4 of the id, keyed by
// a 128-bit key that the members share (Config.PartitionKey), modulo the
// number of partitions: without the key, nobody can compute which ids land
// in one partition, so nobody can fill a victim's partition with ids of
// their own to evict its state there. SipHash is a keyed hash made for
// this (hash tables that take keys from an attacker); its cost per check
// is measured in BenchmarkPartition. The key's fingerprint goes with every
// request, so a member whose key differs is found out at its first request.

// MinPartitionKeyLen is the shortest Config.PartitionKey accepted, in
// bytes: 16, SipHash's key size.
const MinPartitionKeyLen = 16

// partitioner hashes ids onto partitions with one key.
type partitioner struct {
	k0, k1 uint64
	print  uint64 // the key's fingerprint, never 0
}

// newPartitioner derives the hash key and its fingerprint from key, a
// Config.PartitionKey (or the one derived from the cluster's name).
func newPartitioner(key []byte) partitioner {
	h := sha256.New()
	h.Write([]byte("actorlimit cluster partition key\x00"))
	h.Write(key)
	sum := h.Sum(nil)
	pr := sha256.Sum256(append([]byte("actorlimit cluster partition key fingerprint\x00"), sum[:16]...))
	return partitioner{
		k0:    binary.LittleEndian.Uint64(sum[0:8]),
		k1:    binary.LittleEndian.Uint64(sum[8:16]),
		print: binary.LittleEndian.Uint64(pr[:8]) | 1,
	}
}

// of returns the partition of id among n.
func (h partitioner) of(id string, n int) int {
	// Hash does not keep or change its slice: id's bytes are read in place.
	b := unsafe.Slice(unsafe.StringData(id), len(id))
	return int(siphash.Hash(h.k0, h.k1, b) % uint64(n))
}

// defaultPartitionKey is the partition key of a member whose
// Config.PartitionKey is empty, which Config allows only on a loopback
// host: derived from the cluster's name, the same on every member of the
// cluster, and known to anyone who knows the name.
func defaultPartitionKey(name string) []byte {
	return append([]byte("actorlimit default partition key, loopback only\x00"), name...)
}

// keyMismatch records a request from node whose partition key fingerprint
// is print, not this member's: it is counted, and logged at ERROR (once:
// the first sender), since the members then place ids in different
// partitions and the cluster cannot limit them. The request is refused.
func (m *Member) keyMismatch(node string, print uint64) {
	m.counters.keyMismatches.Add(1)
	if !m.mismatchLogged.CompareAndSwap(false, true) {
		return
	}
	if len(node) > maxLoggedName { // the name is the sender's word, unchecked
		node = node[:maxLoggedName] + "..."
	}
	m.cfg.Logger.Error("actorlimit cluster: a member's PartitionKey differs from this member's, its requests are refused: give every member the same key (logged once)",
		"from", node, "its_fingerprint", print, "fingerprint", m.hash.print)
}

// maxLoggedName is the most bytes of a sender's name that a log line holds.
const maxLoggedName = 256

// keyOK reports whether print, a request's fingerprint from node, is this
// member's; if not, it records the mismatch.
func (m *Member) keyOK(node string, print uint64) bool {
	if print == m.hash.print {
		return true
	}
	m.keyMismatch(node, print)
	return false
}
