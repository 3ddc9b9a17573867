package prefetch

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestLineChangesNothing: a prefetch of memory in use, or of the nil
// pointer, neither faults nor changes what it points at.
func TestLineChangesNothing(t *testing.T) {
	words := []uint64{1, 2, 3}
	for i := range words {
		Line(unsafe.Pointer(&words[i]))
	}
	Line(nil)
	assert.Equal(t, []uint64{1, 2, 3}, words)
}

func BenchmarkLine(b *testing.B) {
	words := make([]uint64, 1<<20)
	for i := 0; b.Loop(); i++ {
		Line(unsafe.Pointer(&words[i*4099&(len(words)-1)]))
	}
}
