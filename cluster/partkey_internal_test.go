package cluster

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkPartition is the cost of placing one id in a partition, by id
// length: the keyed hash (SipHash-2-4) that members use, and the unkeyed
// FNV-1a it replaced, for comparison.
func BenchmarkPartition(b *testing.B) {
	h := newPartitioner([]byte("a key of 16 bytes at least"))
	for _, n := range []int{8, 32, 128, 1024} {
		id := strings.Repeat("x", n)
		b.Run(fmt.Sprintf("hash=siphash/len=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			s := 0
			for b.Loop() {
				s += h.of(id, DefaultPartitions)
			}
			_ = s
		})
		b.Run(fmt.Sprintf("hash=fnv1a/len=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			s := 0
			for b.Loop() {
				s += int(fnv1a(id) % DefaultPartitions)
			}
			_ = s
		})
	}
}
