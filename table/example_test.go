package table_test

import (
	"fmt"
	"time"

	"github.com/actorlimit/actorlimit/table"
)

func ExampleTable_Add() {
	tb := table.New(0)
	k := table.Key{Scale: int64(30 * time.Second), ID: "alice"}
	// Bucket 10 of a 30 s scale is [300 s, 330 s); now is in Unix ms.
	tb.Add(k, 10, 1, 300_000)
	e := tb.Add(k, 10, 2, 301_500)
	fmt.Printf("bucket %d count %d created %d modified %d\n", e.Bucket, e.Count, e.Created, e.Modified)
	// A later bucket moves the entry and starts it again.
	e = tb.Add(k, 11, 1, 330_000)
	fmt.Printf("bucket %d count %d created %d modified %d\n", e.Bucket, e.Count, e.Created, e.Modified)
	// Output:
	// bucket 10 count 3 created 300000 modified 301500
	// bucket 11 count 1 created 330000 modified 330000
}

func ExampleTable_FixedWindow() {
	tb := table.New(0)
	k := table.Key{Scale: int64(time.Second), ID: "alice"}
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, at := range []time.Duration{0, 100 * time.Millisecond, 400 * time.Millisecond, time.Second} {
		d := tb.FixedWindow(k, 2, 1, start+int64(at))
		fmt.Printf("at %v: allowed=%v count=%d remaining=%d retry after %v\n", at, d.Allowed, d.Count, d.Remaining, d.RetryAfter)
	}
	// Output:
	// at 0s: allowed=true count=1 remaining=1 retry after 0s
	// at 100ms: allowed=true count=2 remaining=0 retry after 0s
	// at 400ms: allowed=false count=3 remaining=0 retry after 600ms
	// at 1s: allowed=true count=1 remaining=1 retry after 0s
}

func ExampleTable_Expire() {
	tb := table.New(0)
	now := time.Date(2024, 1, 1, 0, 1, 0, 0, time.UTC).UnixNano()
	for i, ago := range []time.Duration{90 * time.Second, 30 * time.Second, 0} {
		k := table.Key{Scale: int64(time.Second), ID: fmt.Sprint("client-", i)}
		tb.FixedWindow(k, 10, 1, now-int64(ago))
	}
	// Delete the entries whose window ended a minute ago or earlier.
	removed, more := tb.Expire(now-int64(time.Minute), 0)
	fmt.Println("removed", removed, "more", more, "left", tb.Len())
	tb.Ascend(func(e table.Entry) bool {
		end := time.Unix(0, e.End()).UTC()
		fmt.Println(e.ID, "count", e.Count, "window ends", end.Format(time.TimeOnly))
		return true
	})
	// Output:
	// removed 1 more false left 2
	// client-1 count 1 window ends 00:00:31
	// client-2 count 1 window ends 00:01:01
}
