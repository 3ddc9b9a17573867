package table

import (
	"fmt"
	"time"
)

// The French article's GCRA: 10 per minute, 11 hits at once.
func ExampleTable_GCRA() {
	tbl := New(0)
	k := Key{Kind: 2, Scale: int64(time.Minute), ID: "admin"}
	for i := range 11 {
		d := tbl.GCRA(k, 10, 10, 1, 0)
		if !d.Allowed {
			fmt.Printf("hit %d denied, retry after %v\n", i+1, d.RetryAfter)
		}
	}
	fmt.Println(tbl.GCRA(k, 10, 10, 1, int64(6*time.Second)).Allowed)
	fmt.Println(tbl.GCRA(k, 10, 10, 1, int64(6*time.Second)).Allowed)
	// Output:
	// hit 11 denied, retry after 6s
	// true
	// false
}
