package quota_test

import (
	"fmt"
	"time"

	"github.com/actorlimit/actorlimit/quota"
)

// A limit of 100 a second over three Envoys: one asks 10, two ask far
// more. The small one gets what it asks and the 10% margin, the others
// divide the rest; when one leaves, its share stays counted until its
// assignment's time to live has passed.
func ExampleDivision() {
	d, err := quota.NewDivision(quota.DivisionConfig{Limit: 100, TTL: 3 * time.Second, Reserve: 5, Margin: 0.1, Hysteresis: 0.04})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	show := func(id uint64, share float64) { fmt.Printf("  Envoy %d: %.1f a second\n", id, share) }
	d.Report(1, 10, time.Second, now)
	d.Report(2, 500, time.Second, now)
	d.Report(3, 500, time.Second, now)
	fmt.Println("at 0 s:")
	d.Assign(now, show)

	d.Leave(3)
	fmt.Println("Envoy 3 leaves; at 1 s:")
	d.Assign(now.Add(time.Second), show)
	fmt.Println("at 3 s:")
	d.Assign(now.Add(3*time.Second), show)
	// Output:
	// at 0 s:
	//   Envoy 1: 11.0 a second
	//   Envoy 2: 44.5 a second
	//   Envoy 3: 44.5 a second
	// Envoy 3 leaves; at 1 s:
	// at 3 s:
	//   Envoy 1: 11.0 a second
	//   Envoy 2: 89.0 a second
}
