package main

import (
	"log/slog"

	"github.com/actorlimit/actorlimit/internal/heapfloor"
)

// heapFloor keeps the collector's heap goal at mib MiB at least
// (-gc-min-heap-mib): a request allocates about a KiB, and a live heap of a
// few MiB at Go's default would be collected many times a second, each
// collection taking a processor from the requests on a small machine. It
// leaves the collector to Go when mib is 0 or GOGC is set (getenv), and
// returns what undoes it, or nil.
func heapFloor(mib int, getenv func(string) string, log *slog.Logger) func() {
	if mib == 0 {
		return nil
	}
	if v := getenv("GOGC"); v != "" {
		log.Info("GOGC is set: -gc-min-heap-mib left to it", "GOGC", v)
		return nil
	}
	f, err := heapfloor.Start(uint64(mib) << 20)
	if err != nil {
		log.Warn("-gc-min-heap-mib not applied", "err", err)
		return nil
	}
	return f.Stop
}
