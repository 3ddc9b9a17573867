// Package prefetch asks the CPU to start loading a cache line that the
// caller will read soon, so that the load from memory overlaps with other
// work instead of stalling the read when it comes.
//
// [Line] is a hint, not a read: it loads nothing into a register, so it is
// no access to memory in Go's memory model (it cannot race with a write of
// another goroutine) and it never faults, whatever the address. On amd64
// it is PREFETCHT0 and on arm64 PRFM PLDL1KEEP; on other architectures it
// does nothing.
package prefetch
