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
	c.buf, c.end, c.n, c.got, c.tried = b, end, 0, false, false
	err := c.raw.Read(c.tries)
	n, got, tried = c.n, c.got, c.tried
	c.buf = nil // hold no caller's buffer
	if err != nil {
		return 0, false, false // a deadline passed or the connection closed
	}
	return n, got, tried
}

// try is poll's loop, on the socket's descriptor fd, with its arguments
// and results in c: a method value made once (c.tries), so that a poll
// allocates nothing.
func (c *conn) try(fd uintptr) bool {
	for i := 0; ; i++ {
		m, err := syscall.Read(int(fd), c.buf)
		switch {
		case m > 0:
			c.n, c.got = m, true
			return true
		case err != syscall.EAGAIN && err != syscall.EINTR:
			c.tried = false // an error or the end: the socket's read says which
			return true
		}
		c.tried = true
		if i&7 == 7 && !time.Now().Before(c.end) {
			return true
		}
		_, _, _ = syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) // the thread may wait its turn: the P is let go meanwhile
		runtime.Gosched()
	}
}
