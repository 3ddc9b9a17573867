package busypoll

import (
	"runtime"
	"syscall"
	"time"
)

// poll reads b without blocking until data comes, the socket reports an
// error or its end, or end passes. Between tries it yields the processor to
// the other threads that want it (the Redis server's, on the same machine:
// with two vCPUs and other work running, a poll that only yielded to the
// goroutines of its own process kept Redis waiting, and made a lone
// caller's round trip slower than a parked read) and then to the other
// goroutines. got is whether n bytes were read;
// tried is whether it polled in vain at least once and went on (false
// when the first read found data, or the socket reported an error or its
// end, which the caller leaves to the socket's own read to report).
func (c *conn) poll(b []byte, end time.Time) (n int, got, tried bool) {
	err := c.raw.Read(func(fd uintptr) bool {
		for i := 0; ; i++ {
			m, err := syscall.Read(int(fd), b)
			switch {
			case m > 0:
				n, got = m, true
				return true
			case err != syscall.EAGAIN && err != syscall.EINTR:
				tried = false // an error or the end: the socket's read says which
				return true
			}
			tried = true
			if i&7 == 7 && !time.Now().Before(end) {
				return true
			}
			_, _, _ = syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) // the thread may wait its turn: the P is let go meanwhile
			runtime.Gosched()
		}
	})
	if err != nil {
		return 0, false, false // a deadline passed or the connection closed
	}
	return n, got, tried
}
