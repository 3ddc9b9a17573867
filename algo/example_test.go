package algo_test

import (
	"fmt"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// An algorithm is a pure function over its typed state: here GCRA, 10 hits
// a minute with a burst of 2, on a state the caller keeps, at times the
// caller gives.
func ExampleGCRAHit() {
	var s algo.BucketState // the zero state is an empty bucket
	period, limit, burst := int64(time.Minute), int64(10), int64(2)
	start := int64(1_800_000_000) * int64(time.Second)
	for _, at := range []time.Duration{0, 0, 0, 6 * time.Second} {
		d, changed := algo.GCRAHit(&s, period, limit, burst, 1, start+int64(at))
		fmt.Printf("at %v: allowed %v, retry after %v, state changed %v\n", at, d.Allowed, d.RetryAfter, changed)
	}
	fmt.Printf("empty again %v after the start\n", time.Duration(s.Death()-start))
	// Output:
	// at 0s: allowed true, retry after 0s, state changed true
	// at 0s: allowed true, retry after 0s, state changed true
	// at 0s: allowed false, retry after 6s, state changed false
	// at 6s: allowed true, retry after 0s, state changed true
	// empty again 18s after the start
}

// A state's binary encoding is what a store writes in a snapshot.
func ExampleFixedState_AppendBinary() {
	s := algo.FixedState{Window: 60_000, Count: 3, Created: 1_800_000_000_000, Modified: 1_800_000_000_250}
	b, _ := s.AppendBinary(nil)
	var back algo.FixedState
	err := back.UnmarshalBinary(b)
	fmt.Println(len(b), "bytes;", back == s, err)
	fmt.Println(back.UnmarshalBinary(b[:len(b)-1]))
	// Output:
	// 17 bytes; true <nil>
	// algo: bad state: a truncated number
}
