package main

import (
	"io"
	"log/slog"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGCMinHeap: by default actorlimitd raises GOGC while its heap is small
// (go_gc_gogc_percent, 100 at Go's default), and leaves it to Go with
// -gc-min-heap-mib 0 or with GOGC set in its environment.
func TestGCMinHeap(t *testing.T) {
	on := startWithConfig(t, serveConfig)
	assert.Greater(t, metric(on, "go_gc_gogc_percent"), 100.0, "a small heap's GOGC raised")
	off := startWithConfig(t, serveConfig, "-gc-min-heap-mib", "0")
	assert.Equal(t, 100.0, metric(off, "go_gc_gogc_percent"), "Go's default")

	defer debug.SetGCPercent(debug.SetGCPercent(100))
	log := slog.New(slog.DiscardHandler)
	assert.Nil(t, heapFloor(64, func(k string) string { return map[string]string{"GOGC": "200"}[k] }, log), "GOGC set: left to Go")
	assert.Nil(t, heapFloor(0, func(string) string { return "" }, log))
	stop := heapFloor(64, func(string) string { return "" }, log)
	require.NotNil(t, stop)
	assert.Greater(t, debug.SetGCPercent(100), 100)
	stop()
	assert.Equal(t, 100, debug.SetGCPercent(100), "Go's default back")

	_, err := parseFlags([]string{"-config", "x", "-gc-min-heap-mib", "-1"}, io.Discard)
	assert.ErrorContains(t, err, "-gc-min-heap-mib -1 is not between 0 and")
}
