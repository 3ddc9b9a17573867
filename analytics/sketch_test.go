package analytics

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSketchGuarantees feeds a skewed stream with many more keys than
// counters and checks the space-saving bounds against exact counts: every
// held count is at least the truth and at most MaxError above it, and every
// key above total/m is held.
func TestSketchGuarantees(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, seed))
			const m = 16
			s := newSketch(m)
			exact := map[string]uint64{}
			total := 0
			for range 20000 {
				var k string
				if r.IntN(3) == 0 {
					k = fmt.Sprintf("heavy%d", r.IntN(3)) // a third of the stream over 3 keys
				} else {
					k = fmt.Sprintf("k%d", r.IntN(5000))
				}
				s.add(k)
				exact[k]++
				total++
			}
			held := map[string]bool{}
			for _, g := range s.top(m) {
				held[g.Group] = true
				assert.GreaterOrEqual(t, g.Count, exact[g.Group], g.Group)
				assert.LessOrEqual(t, g.Count-g.MaxError, exact[g.Group], g.Group)
			}
			for k, n := range exact {
				if n > uint64(total/m) {
					assert.True(t, held[k], "%s (%d > %d) must be held", k, n, total/m)
				}
			}
			top := s.top(3)
			require.Len(t, top, 3)
			for _, g := range top {
				assert.Contains(t, g.Group, "heavy")
			}
			s.reset()
			assert.Empty(t, s.top(3))
		})
	}
}

func TestSketchHeap(t *testing.T) {
	s := newSketch(3)
	for _, k := range []string{"a", "b", "a", "c", "a", "b", "d"} {
		s.add(k)
	}
	// d replaces c (the least, 1) and starts at 2 with error 1.
	assert.Equal(t, []TopGroup{{"a", 3, 0}, {"b", 2, 0}, {"d", 2, 1}}, s.top(5))
	for i, c := range s.heap {
		assert.Equal(t, i, s.pos[c.key])
	}
}
