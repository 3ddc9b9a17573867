//go:build amd64 || arm64

package prefetch

import "unsafe"

// Line asks the CPU to bring the cache line holding p into its caches,
// without waiting for it. p need not point to valid memory.
//
//go:noescape
func Line(p unsafe.Pointer)
