package persist

import (
	"bytes"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// FuzzRecords decodes arbitrary bytes as a run of records, past the
// checksums that keep FuzzLoad's inputs mostly out: decoding must not
// panic, and every record it accepts must come back the same through its
// encoding (varints read may be overlong; they are written short).
func FuzzRecords(f *testing.F) {
	var b []byte
	for _, r := range []algo.Record{
		{Algorithm: algo.GCRA, Period: time.Second, ID: "a", Death: 42, State: []byte{1, 2, 3}},
		{Algorithm: algo.SlidingLog, Period: time.Hour, ID: "", Death: -1},
		{Algorithm: algo.FixedWindow, Period: 1, ID: "é", State: []byte{}},
	} {
		b = AppendRecord(b, r)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		for len(b) > 0 {
			r, n, err := readRecord(b)
			if err != nil {
				return
			}
			if n <= 0 || n > len(b) {
				t.Fatalf("size %d of %d bytes", n, len(b))
			}
			again, m, err := readRecord(AppendRecord(nil, r))
			if err != nil || m > n || again.ID != r.ID || again.Death != r.Death || again.Period != r.Period ||
				again.Algorithm != r.Algorithm || (again.State == nil) != (r.State == nil) || !bytes.Equal(again.State, r.State) {
				t.Fatalf("%+v read from %x came back as %+v (%v)", r, b[:n], again, err)
			}
			b = b[n:]
		}
	})
}

// TestRecordRoundTrip checks that nil and empty states stay apart.
func TestRecordRoundTrip(t *testing.T) {
	for _, st := range [][]byte{nil, {}, {0}} {
		in := algo.Record{Algorithm: algo.TokenBucket, Period: time.Minute, ID: "k", Death: 7, State: st}
		out, n, err := readRecord(AppendRecord(nil, in))
		if err != nil || n == 0 {
			t.Fatalf("%+v: %v", in, err)
		}
		if (out.State == nil) != (st == nil) || !bytes.Equal(out.State, st) || out.ID != in.ID || out.Death != in.Death || out.Period != in.Period || out.Algorithm != in.Algorithm {
			t.Errorf("%+v came back as %+v", in, out)
		}
	}
}
