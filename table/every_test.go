package table

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// TestEveryAlgorithm walks every algorithm of the one list (algo.All)
// through every switch over the algorithms in the table: a hit and a peek
// (apply, peek), a record and a snapshot (appendState), and a load into
// another table (Load). An algorithm added to the list and forgotten in one
// of them fails here: those switches have no default that would quietly
// treat it as another algorithm.
func TestEveryAlgorithm(t *testing.T) {
	const now = int64(1_700_000_000) * int64(time.Second)
	for _, a := range algo.All() {
		t.Run(a.String(), func(t *testing.T) {
			hit := algo.Check{Op: algo.OpHit, Algorithm: a, ID: "x", Period: time.Second, Limit: 10, Burst: 10, N: 1}
			peek := hit
			peek.Op = algo.OpPeek
			tb := New(0)
			before := tb.Apply(&peek, now)
			if d := tb.Apply(&hit, now); !d.Allowed {
				t.Fatalf("the first hit was denied: %+v", d)
			}
			after := tb.Apply(&peek, now)
			if after.Remaining >= before.Remaining {
				t.Errorf("a hit left Remaining at %d (%d before)", after.Remaining, before.Remaining)
			}

			r := tb.Record(&hit)
			if r.State == nil || r.Death <= now {
				t.Fatalf("record %+v: no state, or dead already", r)
			}
			var snap []algo.Record
			tb.Snapshot(now, func(r algo.Record) bool {
				r.State = append([]byte(nil), r.State...)
				snap = append(snap, r)
				return true
			})
			if len(snap) != 1 || !reflect.DeepEqual(snap[0], r) {
				t.Fatalf("snapshot %+v, want the record %+v", snap, r)
			}

			loaded := New(0)
			if err := loaded.Load(now, r); err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := loaded.Apply(&peek, now); got != after {
				t.Errorf("after Load a peek gives %+v, want %+v", got, after)
			}
		})
	}
}

// TestUnknownAlgorithm: an algorithm that is not in the list is an
// impossible check (the root validates every check), so the table panics
// rather than decide it as another algorithm; a record of one is an error.
func TestUnknownAlgorithm(t *testing.T) {
	const now = int64(1_700_000_000) * int64(time.Second)
	bad := algo.Algorithm(len(algo.All()))
	for name, op := range map[string]algo.Op{"hit": algo.OpHit, "peek": algo.OpPeek} {
		t.Run(name, func(t *testing.T) {
			c := algo.Check{Op: op, Algorithm: bad, ID: "x", Period: time.Second, Limit: 10, N: 1}
			defer func() {
				if recover() == nil {
					t.Errorf("Apply decided a check of %v", bad)
				}
			}()
			New(0).Apply(&c, now)
		})
	}
	err := New(0).Load(now, algo.Record{Algorithm: bad, Period: time.Second, ID: "x", State: []byte{1}, Death: now + 1})
	if !errors.Is(err, ErrRecord) {
		t.Errorf("Load of a record of %v: %v, want ErrRecord", bad, err)
	}
}

// TestTestsCoverEveryAlgorithm: the tests that run every algorithm of the
// table (allAlgos) have one entry per algorithm of the list.
func TestTestsCoverEveryAlgorithm(t *testing.T) {
	var names, want []string
	for _, a := range allAlgos {
		names = append(names, a.name)
	}
	for _, a := range algo.All() {
		want = append(want, a.String())
	}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("allAlgos runs %v; the list has %v", names, want)
	}
}
