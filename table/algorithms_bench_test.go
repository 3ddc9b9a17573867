package table

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkDecide measures one hit of each algorithm on the table alone,
// without the actor: 10 000 keys, all in the table first, 100 hits per
// second per key, the clock moving 1 µs a hit.
func BenchmarkDecide(b *testing.B) {
	const keys = 10_000
	for _, a := range allAlgos {
		b.Run(fmt.Sprintf("alg=%s/keys=%d", a.name, keys), func(b *testing.B) {
			tbl := New(0)
			ks := make([]Key, keys)
			for i := range ks {
				ks[i] = Key{Kind: uint8(a.alg), Scale: int64(time.Second), ID: fmt.Sprintf("user-%06d", i)}
			}
			if len(ks) == 0 {
				b.Fatal("no keys")
			}
			now := int64(1_800_000_000) * int64(time.Second)
			for _, k := range ks {
				a.hit(tbl, k, 100, 100, 1, now)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				now += int64(time.Microsecond)
				a.hit(tbl, ks[i%keys], 100, 100, 1, now)
			}
		})
	}
}
